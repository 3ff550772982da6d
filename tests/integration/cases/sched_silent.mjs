// SPDX-License-Identifier: Apache-2.0
// A lane whose provider sends no rate-limit headers (issue 30 items 4 and 6). It opens by
// a slow start, not all at once; what it let go before a refusal and had not written yet
// stays out of the window the refusal announced; and once refusals have shown the rate
// the provider carries, it holds near it and probes above it later and later.
// Each test has a mock of its own and a pacerd of its own; figures are the mock's counts.
import assert from 'node:assert/strict';
import { SLOW, keyHash, request, sleep } from '../lib.mjs';
import { chatBody, events, keyEntry, logDigest, runLoad, send, startPacerdFor, startPacerdWithAdmin, summarize } from '../load.mjs';

// It counts arrivals inside a retry-after window and refusals at an exact bucket: apart
// from the files that run together. b. and c. are light (10 to 20 agents at 2 to 10
// requests a second, each its own mock and pacerd): beside other light timing tests only.
export const alone = true;

/** Arrival instants at the mock of `key`'s requests, ms after the first. */
async function arrivals(mock, key) {
  const auth = `Bearer ${key}`;
  const t = (await mock.requests())
    .filter((r) => r.headers.some(([n, v]) => n.toLowerCase() === 'authorization' && v === auth))
    .map((r) => r.t_mono_us / 1000).sort((a, b) => a - b);
  return t.map((x) => x - t[0]);
}

const chat = (key, agents) => (i) => ({
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-agent-id': `agent-${i % agents}` },
  body: chatBody({ max_tokens: 8 }),
});

/** The `concurrency_changed` lines of `key`'s lane: [from, to] each. */
const changes = (p, key) => events(p, 'concurrency_changed').filter((l) => l.key === keyHash(key).slice(0, 12)).map((l) => [l.from, l.to]);

export const tests = [
  {
    // Slow start (item 4). The mock answers JSON after 200 ms, no rate-limit headers, no
    // limit. 32 requests at once on a fresh lane of a provider not heard from yet: 4 go
    // (the blind start: their headers might say how much room there is), and their
    // answers, which say nothing, are slow start's first round trip: 8 may be in flight,
    // then 16, then the rest (before: 4, then the other 28 at once). A second key's lane,
    // its provider now known silent, starts at concurrency.slow_start (4 here) and doubles
    // the same way. Lower bounds on when the waves come (a loaded machine only makes them
    // later), exact counts of what came before each.
    name: 'a. a silent lane opens by a slow start: 4, then 8, 16 … per round trip, not all at once',
    alone: false,
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false, latency_ms: 200 } });
      const p = await startPacerdFor(t, mock, { plans: { four: { concurrency: { slow_start: 4 } } }, keys: [keyEntry('sk-silent-start-0002', 'four')] });
      const waves = async (key) => {
        const rs = await Promise.all(Array.from({ length: 32 }, (_, i) => send(`${p.url}/v1/chat/completions`, { ...chat(key, 32)(i), timeout_ms: 15000 })));
        assert.deepEqual([...new Set(rs.map((r) => r.status))], [200], rs.find((r) => r.status !== 200)?.body);
        const at = await arrivals(mock, key);
        // before ~200 ms, ~400, ~600 (each wave's answers come 200 ms after it)
        return [150, 350, 550].map((ms) => at.filter((x) => x < ms).length).concat(at.length);
      };
      const first = await waves('sk-silent-start-0001');
      const second = await waves('sk-silent-start-0002');
      console.log(`#   a: arrivals by 150/350/550 ms and in all: first lane ${first.join('/')}, a lane of the provider known silent ${second.join('/')}; ` +
        `concurrency_changed ${JSON.stringify(changes(p, 'sk-silent-start-0001'))} / ${JSON.stringify(changes(p, 'sk-silent-start-0002'))}`);
      for (const [name, w] of [['first', first], ['second', second]]) {
        assert.ok(w[0] <= 4, `${name} lane: ${w[0]} requests before its first round trip (slow start from 4)`);
        assert.ok(w[1] <= 4 + 8, `${name} lane: ${w[1]} requests before its second round trip (4, then 8 in flight)`);
        assert.ok(w[2] <= 4 + 8 + 16, `${name} lane: ${w[2]} requests before its third round trip`);
        assert.equal(w[3], 32);
      }
      const tos = changes(p, 'sk-silent-start-0001').map(([, to]) => to);
      assert.ok(tos.includes(8) && tos.includes(16), `the first lane's limit did not double per round trip: ${JSON.stringify(tos)}`);
    },
  },
  {
    // The case (item 4): a provider that sends no rate-limit headers and refuses with
    // `retry-after: 3` (120 RPM as a bucket of 4), 10 agents × 3 (30 clients) on a fresh key.
    // Counted at the mock (window_violations): a request that arrives after a 429 left and
    // before its window ends, 3 ms of grace for one already on the wire (sched_quality 3's
    // rule). Before: 4 went, then the other 26 at once; the first met the empty bucket, and
    // whatever had not reached the mock by the time its 429 left arrived inside the window:
    // 9, 0, 12, 0, 4 in five runs (0-25 without the grace). Now 4 go, then 8 (slow start),
    // and what pacerd let go but had not written when the 429 came (a connection still
    // opening) is not written: it queues again behind the hold. Three runs, each with a fresh
    // mock and pacerd, each watched for 5 s: the first wave, the window, the probe after it,
    // the requests paced after it (the first refusal's body names the limit: 120 per minute).
    alone: 'light',
    name: 'b. silent provider, retry-after 3, 120 RPM as a bucket of 4, 10 agents × 3: 0 requests inside an advertised window (3 runs)',
    timeout_ms: 60000,
    fn: async (t) => {
      const key = 'sk-silent-window-0001';
      const seen = [];
      for (let run = 1; run <= 3; run++) {
        const mock = await t.startMock({ config: { style: 'openai', rpm: 120, burst: 4, retry_after_s: 3, headers: false, window_grace_ms: 3 } });
        const p = await startPacerdFor(t, mock);
        const r = await runLoad({ base: p.url, n: 30, concurrency: 30, makeRequest: chat(key, 10), deadline_ms: 5000 });
        const st = await mock.stats();
        const sum = summarize(r);
        const tos = changes(p, key).map(([, to]) => to);
        const at = await arrivals(mock, key);
        seen.push({ run, violations: st.window_violations, refused: st.rate_limited, ok: st.responses['200'] ?? 0, tos, statuses: sum.statuses, digest: st.window_violations ? logDigest(p) : '' });
        console.log(`#   b: run ${run}: window_violations=${st.window_violations} mock responses ${JSON.stringify(st.responses)}; ` +
          `arrivals (ms) ${at.map((x) => x.toFixed(1)).join(' ')}; limits ${tos.join(' ')}; clients ${JSON.stringify(sum.statuses)}`);
        await p.stop();
        await mock.stop();
      }
      for (const s of seen) {
        assert.ok(s.refused >= 1, `run ${s.run}: the mock never refused: the scenario tested nothing`);
        assert.ok(s.ok >= 5, `run ${s.run}: ${s.ok} successes (the 4 blind, then the probe after the window at least)`);
        assert.ok(Math.max(...s.tos) <= 8, `run ${s.run}: the lane's limits ${JSON.stringify(s.tos)}: slow start from 4 doubles to 8 at most before the bucket of 4 refuses`);
        const other = Object.keys(s.statuses).filter((k) => k !== '200' && k !== 'unanswered at the run\'s deadline');
        assert.deepEqual(other, [], `run ${s.run}: client statuses ${JSON.stringify(s.statuses)}`);
      }
      const bad = seen.filter((s) => s.violations > 0);
      assert.equal(bad.length, 0, `requests inside an advertised window: ${seen.map((s) => s.violations).join(', ')} in runs 1-3\n${bad.map((s) => s.digest).join('\n')}`);
    },
  },
  {
    // The converged lane (item 6): no rate-limit headers and refusals that name no limit
    // (terse_429: "Rate limit exceeded.", as Azure's and most OpenAI-compatible gateways'),
    // 600 RPM as a bucket of 10, 50 ms away; 20 agents, no plan, 60 s of steady load.
    // Before: the dispatch delay's AIMD (+3 req/s per second of successes) met a refusal
    // every ~1.5 s, forever (33 in 30 s, 19 of them after the first 5 s). Now the refusals
    // bound the provider's rate and the lane holds near it, probing above it later and more
    // gently each time: <= 2 refusals after the first 5 s (measured: 1), and the lane still
    // carries >= 85 % of the limit over those 55 s (measured: ~99 %).
    alone: 'light',
    name: 'c. no headers, refusals that name no limit, 600 RPM as a bucket of 10, 20 agents, 60 s: <= 2 refusals after the first 5 s, >= 85 % of the limit',
    timeout_ms: 90000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600, burst: 10, headers: false, terse_429: true, latency_ms: 50 } });
      const p = await startPacerdWithAdmin(t, mock);
      const key = 'sk-silent-steady-0001';
      const t0 = Date.now();
      const load = runLoad({ base: p.url, n: 100000, concurrency: 20, makeRequest: chat(key, 20), deadline_ms: 60000, t0 });
      await sleep(5000 - (Date.now() - t0));
      const s5 = await mock.stats();
      const t5 = Date.now();
      const r = await load;
      const s60 = await mock.stats();
      // /status shows the search: the slow start over, the probe's bound (what the
      // successes between two refusals carried: at most the bucket's 10 req/s and its
      // refill, at least what the lane was paced at) and the curve's pace.
      const st = JSON.parse((await request(`${p.admin}/status`, { timeout_ms: 5000 })).body.toString());
      const lane = st.lanes.find((l) => l.key === keyHash(key));
      const secs = (Date.now() - t5) / 1000;
      const ok = (s60.responses['200'] ?? 0) - (s5.responses['200'] ?? 0);
      const refused = s60.rate_limited - s5.rate_limited;
      const share = ok / secs / 10;
      const retries = events(p, 'retry').map((l) => ((Date.parse(l.ts) - t0) / 1000).toFixed(1));
      const msg = `in the first 5 s: ${s5.rate_limited} refused, ${s5.responses['200'] ?? 0} ok; then ${refused} refused and ${ok} ok over ${secs.toFixed(1)} s ` +
        `(${(ok / secs).toFixed(2)} req/s, ${(share * 100).toFixed(1)} % of 10); refusals at (s) ${retries.join(' ')}; clients ${JSON.stringify(summarize(r).statuses)}`;
      console.log(`#   c: ${msg}`);
      t.note?.(`c: ${refused} refusals after the first 5 s, ${(share * 100).toFixed(1)} % of the limit`);
      assert.ok(s5.rate_limited >= 1, 'no refusal in the first 5 s: the lane never met the limit');
      assert.ok(refused <= 2, `${refused} refusals after the first 5 s (> 2)\n${msg}\n${logDigest(p)}`);
      assert.ok(share >= 0.85 / SLOW, `${(share * 100).toFixed(1)} % of the limit (< 85 %)\n${msg}`);
      const rp = lane?.rate_probe;
      console.log(`#   c: /status slow_start ${lane?.slow_start}, rate_probe ${JSON.stringify(rp)}`);
      assert.equal(lane?.slow_start, false, JSON.stringify(lane));
      assert.ok(rp && rp.bound_rps >= 7.5 && rp.bound_rps <= 11.5, `/status rate_probe ${JSON.stringify(rp)}: no bound near 10 req/s`);
      assert.ok(rp.rate_rps >= 0.95 * rp.bound_rps - 1e-6 && rp.k_ms >= 12000, `/status rate_probe ${JSON.stringify(rp)}`);
    },
  },
];
