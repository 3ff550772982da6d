// SPDX-License-Identifier: Apache-2.0
// Scheduler scenarios with no plan in pacerd (zero configuration: learning from the
// rate-limit headers, AIMD, retries): b. a 300 RPM upstream, c. a TPM upstream,
// g. an upstream whose capacity flaps between 20 and 5 rps; 5. learning that wastes
// neither the budget nor the first seconds (a 300 RPM limit enforced as a bucket of 5,
// capacity flapping 20/5 rps every 10 s).
// Each test has a mock of its own and a pacerd of its own; figures are the mock's counts.
import assert from 'node:assert/strict';
import { SLOW, keyHash } from '../lib.mjs';
import { chatBody, events, logDigest, runLoad, scenarioLine, startPacerdFor, summarize } from '../load.mjs';

const chat = (key, max_tokens = 16, content) => () => ({
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  body: chatBody({ max_tokens, content }),
});

/**
 * The share of what a refilling bucket (capacity C, refill ρ per s, full at the start)
 * could admit during the run that was used: ok / (C + ρ·wall). The scenario line's
 * goodput (ok per second ÷ ρ) exceeds 100 % on short runs because the bucket starts full.
 */
function admissible(id, ok, cap, rho, wall_ms) {
  const v = ok / (cap + rho * (wall_ms / 1000)) * 100;
  console.log(`#   ${id}: used ${v.toFixed(1)}% of what the mock could admit in that time (bucket ${cap} full at the start + ${rho}/s)`);
  return v;
}

function learnedLines(p) {
  return events(p, 'limit_learned').slice(0, 4).map((l) => JSON.stringify(l).slice(0, 260)).join('\n#     ');
}

/**
 * The short-window bucket of the "5." cases: OpenAI headers say 300 RPM, the bucket
 * holds 5 and refills 5/s; no plan. n requests from `clients`, the mock `latency` ms.
 * Used: successes / (5 + 5/s × the span of the arrivals at the mock), the share of what
 * the provider could have accepted.
 */
async function shortBucket(t, { key, n, clients, latency }) {
  const mock = await t.startMock({ config: { style: 'openai', rpm: 300, burst: 5, latency_ms: latency } });
  const p = await startPacerdFor(t, mock);
  const run = await runLoad({ base: p.url, n, concurrency: clients, makeRequest: chat(key), deadline_ms: 45000 });
  const sum = summarize(run);
  const st = await mock.stats();
  const at = (await mock.requests()).map((r) => r.t_mono_us / 1000).sort((a, b) => a - b);
  const span = (at[at.length - 1] - at[0]) / 1000;
  const ok = st.responses['200'] ?? 0;
  const refused = st.responses['429'] ?? 0;
  const used = ok / (5 + 5 * span) * 100;
  const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
  return { p, sum, st, at, span, ok, refused, used, why };
}

// Each test in a process of its own under run.mjs --jobs (they are long and wait on
// buckets, not on the cores).
export const split = true;

export const tests = [
  {
    // b. The mock: 300 RPM per key (bucket of 300, full at the start, refilling 5/s), OpenAI
    // headers. 360 requests: 300 pass from the full bucket, the last 60 need the refill,
    // ideally (360 − 300)/5 = 12 s (a little less: the bucket refills while the first 300 go);
    // pacing at ~0.95 × the learned rate makes it ~12.6 s. Bound: 24 s (twice the ideal).
    name: 'b. no plan, mock 300 RPM with OpenAI headers, 360 requests: no client error, upstream 429 ≤ 5 %',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 300 } });
      const p = await startPacerdFor(t, mock);
      const key = 'sk-scen-b-0001';
      const N = 360;
      const run = await runLoad({ base: p.url, n: N, concurrency: 40, makeRequest: chat(key), deadline_ms: 28000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const up429 = st.responses['429'] ?? 0;
      scenarioLine('b', { sum, wall_ms: run.wall_ms, limit_rps: 5, upstream429: up429, sent: N });
      admissible('b', sum.ok, 300, 5, run.wall_ms);
      console.log(`#   b: mock requests=${st.requests} responses=${JSON.stringify(st.responses)} window_violations=${st.window_violations} in_flight_max=${st.in_flight_max}; ` +
        `client statuses=${JSON.stringify(sum.statuses)} retried=${sum.retried}; pacerd limit_learned lines=${events(p, 'limit_learned').length}\n#     ${learnedLines(p)}`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of ${N} requests answered within the 28 s bound (ideal ≈ 12 s): ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
      assert.ok(up429 <= 0.05 * N, `${up429} upstream 429s for ${N} requests (> 5 %)${why}`);
      assert.ok(run.wall_ms <= 24000 * SLOW, `wall ${(run.wall_ms / 1000).toFixed(2)} s, ideal ≈ 12 s`);
    },
  },
  {
    // c. The mock: 60 000 TPM per key (bucket full at the start, refilling 1000 tokens/s),
    // OpenAI headers for tokens only. Each request costs the mock 10 (prompt: 40 characters
    // / 4) + 500 (max_tokens) = 510 tokens: 117 pass from the full bucket, then ~1.96/s;
    // 140 requests ≈ 12 s ideally. The mock's usage reports only ~15 tokens per answer:
    // pacerd must not take that as the cost the upstream charges (OpenAI counts max_tokens).
    name: 'c. no plan, mock 60k TPM, requests with max_tokens 500: no client-visible error',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', tpm: 60000 } });
      const p = await startPacerdFor(t, mock);
      const key = 'sk-scen-c-0001';
      const N = 140;
      const content = 'Count the tokens of this forty-char text'; // 40 characters
      assert.equal(content.length, 40);
      const run = await runLoad({ base: p.url, n: N, concurrency: 20, makeRequest: chat(key, 500, content), deadline_ms: 28000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const up429 = st.responses['429'] ?? 0;
      const rho = 60000 / 60 / 510; // requests per second the refill allows
      scenarioLine('c', { sum, wall_ms: run.wall_ms, limit_rps: rho, upstream429: up429, sent: N });
      admissible('c', sum.ok, Math.floor(60000 / 510), Number(rho.toFixed(2)), run.wall_ms);
      console.log(`#   c: mock requests=${st.requests} responses=${JSON.stringify(st.responses)} window_violations=${st.window_violations}; ` +
        `client statuses=${JSON.stringify(sum.statuses)} retried=${sum.retried}\n#     ${learnedLines(p)}`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of ${N} requests answered within the 28 s bound (ideal ≈ 12 s): ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(st.keys[keyHash(key)]?.requests - (st.keys[keyHash(key)]?.rate_limited ?? 0), N, 'successful upstream requests');
    },
  },
  {
    // g. The mock's global capacity flaps: 20 rps for 2 s, 5 rps for 2 s, repeating (12.5 rps
    // on average); over it, it answers 429 (retry-after: 1), 503, 529 in turn. No plan in
    // pacerd: AIMD and retries must get every one of 120 requests through (≈ 9.6 s ideally).
    // The waste (upstream overload answers) is printed, not asserted. The wall time is held
    // to 20 s (about twice the ideal): beyond "every request succeeds", a lane that crawls
    // for tens of seconds after one burst of errors is the 429 storm's opposite failure, and
    // without a bound below the run's 28 s deadline the outcome would be a coin toss.
    name: 'g. no plan, capacity flapping 20/5 rps with 429/503/529: every request succeeds',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock);
      const key = 'sk-scen-g-0001';
      const N = 120;
      // Configured just before the run: the capacity schedule starts now.
      await mock.configure({ style: 'openai', capacity: [{ rps: 20, ms: 2000 }, { rps: 5, ms: 2000 }], overload_status: [429, 503, 529] });
      const run = await runLoad({ base: p.url, n: N, concurrency: 20, makeRequest: chat(key), deadline_ms: 28000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const r = st.responses;
      const up429 = r['429'] ?? 0;
      const waste = (r['429'] ?? 0) + (r['503'] ?? 0) + (r['529'] ?? 0);
      scenarioLine('g', { sum, wall_ms: run.wall_ms, limit_rps: 12.5, upstream429: up429, sent: N });
      console.log(`#   g: waste: upstream 429=${r['429'] ?? 0} 503=${r['503'] ?? 0} 529=${r['529'] ?? 0} (${waste} overload answers for ${N} requests, ` +
        `${(waste / st.requests * 100).toFixed(1)}% of ${st.requests} upstream requests); client statuses=${JSON.stringify(sum.statuses)}, ` +
        `max x-pacer-attempts=${sum.max_attempts}; pacerd retry lines=${events(p, 'retry').length}, concurrency_changed=${events(p, 'concurrency_changed').length}`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of ${N} requests answered within the 28 s bound (ideal ≈ 9.6 s): ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(r['200'], N, `upstream 200s: ${JSON.stringify(r)}`);
      assert.ok(run.wall_ms <= 20000 * SLOW, `wall ${(run.wall_ms / 1000).toFixed(2)} s for ${N} requests at 12.5 rps on average (ideal ≈ 9.6 s, bound 20 s)${why}`);
    },
  },
  {
    // 5. An OpenAI-style 300 RPM limit enforced over a short window: the bucket holds 5
    // and refills 5/s, while the headers say limit 300 (remaining 0-4, reset <= 1 s). No
    // plan, 10 clients, 100 ms latency. The first burst of 10 met 5 refusals when a fresh
    // lane sent everything blind; since issue 19 it sends 4 and waits for the first answer
    // (0-2 refusals in 4 runs, 5 in 3 before); after that, learning must neither refuse nor
    // idle: it finds the bucket's real size from the (remaining, reset) pairs (not the
    // 300 the headers name), and a budget at 0 waits for its next unit (1 / rate), not
    // for the bucket to be full again (the reset). Used: successes / (5 + 5/s × the span
    // of the arrivals) >= 95 %, refusals <= 7: the burst's 5 and at most 2 later (a pace at
    // 99 % of a bucket this small meets one now and then on a loaded machine: 1 run in 5).
    name: '5. no plan, 300 RPM enforced as a bucket of 5: >= 95 % of what the provider could accept, <= 7 refusals (the first burst\'s 5 + 2)',
    timeout_ms: 60000,
    fn: async (t) => {
      const N = 120;
      const { p, sum, span, ok, refused, used, why } = await shortBucket(t, { key: 'sk-learn-short-0001', n: N, clients: 10, latency: 100 });
      console.log(`#   5: ${ok} accepted, ${refused} refused, arrivals over ${span.toFixed(2)} s: used ${used.toFixed(1)} % of what the bucket could accept (5 + 5/s); ` +
        `client statuses ${JSON.stringify(sum.statuses)}\n#     ${learnedLines(p)}`);
      assert.equal(sum.ok, N, `client statuses ${JSON.stringify(sum.statuses)}${why}`);
      assert.ok(refused <= 7, `${refused} refusals (> 7: 5 in the first burst, then at most 2)${why}`);
      assert.ok(used >= 95 / SLOW, `used ${used.toFixed(1)} % of what the provider could accept (< 95 %)${why}`);
    },
  },
  {
    // 5. Issue 19: the same short-window bucket (limit header 300, bucket 5 refilling 5/s),
    // 20 clients, 150 ms latency, 100 requests. Goodput as in the case above: successes /
    // (5 + 5/s × the span of the arrivals at the mock), the share of what the provider
    // could have accepted. Before: 15 refusals in each of 3 runs (98.3-98.7 %), all 15 in
    // the first 2 ms (20 requests sent blind into a bucket of 5, window_violations 0); with
    // only the blind burst capped, 18 (the first answers, anchored to L = 300, read as a
    // refill of ~25 000/min). After: 0 refusals, 98.8-99.0 % (3 runs; 0-1 in 3 more of a
    // draft that let rough fits replace precise ones). LEARN_TRACE=1
    // prints the arrivals and pacerd's limit_learned and retry lines.
    name: '5. no plan, 300 RPM enforced as a bucket of 5, 20 clients, 150 ms: <= 5 refusals at >= 90 % goodput',
    timeout_ms: 60000,
    fn: async (t) => {
      const N = 100;
      const { p, sum, st, at, span, ok, refused, used, why } = await shortBucket(t, { key: 'sk-learn-short-0020', n: N, clients: 20, latency: 150 });
      console.log(`#   5/20: ${ok} accepted, ${refused} refused (window_violations ${st.window_violations}), arrivals over ${span.toFixed(2)} s: ` +
        `used ${used.toFixed(1)} % of what the bucket could accept (5 + 5/s); client statuses ${JSON.stringify(sum.statuses)}\n#     ${learnedLines(p)}`);
      if (process.env.LEARN_TRACE) {
        console.log(`#   arrivals (ms from the first): ${at.map((x) => (x - at[0]).toFixed(0)).join(' ')}`);
        for (const l of p.logs().filter((x) => ['limit_learned', 'retry', 'concurrency_changed'].includes(x.event))) console.log(`#   ${JSON.stringify(l).slice(0, 400)}`);
      }
      assert.equal(sum.ok, N, `client statuses ${JSON.stringify(sum.statuses)}${why}`);
      assert.ok(refused <= 5, `${refused} refusals (> 5)${why}`);
      assert.ok(used >= 90 / SLOW, `used ${used.toFixed(1)} % of what the provider could accept (< 90 %)${why}`);
    },
  },
  {
    // 5. Capacity flapping 20 <-> 5 req/s every 10 s (a global bucket holding one second's
    // worth), 429 (retry-after: 1) / 503 / 529 in turn over it, no rate-limit headers, 100 ms
    // latency; no plan, 20 clients, 30 s. The lane's only guide is refusals: the rate AIMD
    // (first cut from the last second's successes, × 0.67 per signal, + 3 req/s per second
    // of successes) must keep refusals <= 10 % of the upstream requests while the goodput
    // stays >= 80 % of the capacity over the run. The capacity counts the buckets' rates,
    // not what a bucket holds: the AIMD, cut to 0.67 x the last second's successes and
    // climbing 3 req/s a second, rides each refill after a hold above 20 req/s; since the
    // silent lanes (issue 30 item 6), a fresh lane's first bound (the successes between
    // its first two refusals, ~21 req/s) settles, and the rate probe holds at 0.95-1 x
    // that until the next refusal, which is the sustained rate and not the refill. Measured
    // on a quiet machine (LEARN_TRACE=1 prints the arrivals per second and the lane's lines):
    // 83.6-85.3 % (4 runs) with the probe, 88.9-90.7 % (3 runs) with it disabled, the
    // difference mostly in the 2 s after the first settling refusal; refusals 4-5 % either way.
    // The bound was 85 % (86.7-92 % before the probe), which CI's loaded machine missed.
    name: '5. no plan, capacity flapping 20/5 req/s every 10 s, no headers: refusals <= 10 %, goodput >= 80 % of capacity',
    timeout_ms: 60000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock);
      const key = 'sk-learn-flap-0001';
      await mock.configure({ style: 'openai', headers: false, latency_ms: 100, capacity: [{ rps: 20, ms: 10000 }, { rps: 5, ms: 10000 }], overload_status: [429, 503, 529] });
      const t0 = process.hrtime.bigint();
      const run = await runLoad({ base: p.url, n: 1000, concurrency: 20, makeRequest: chat(key), deadline_ms: 30000, timeout_ms: 30000 });
      const st = await mock.stats();
      const recs = await mock.requests();
      const last = Math.max(...recs.map((r) => r.t_mono_us / 1000)) - Number(t0 / 1000000n);
      let capacity = 0; // ∫ rps dt from the configuration (≈ t0) to the last arrival
      for (let ms = 0; ms < last; ms += 100) capacity += (Math.floor(ms / 10000) % 2 === 0 ? 20 : 5) * 0.1;
      const r = st.responses;
      const ok = r['200'] ?? 0;
      const refused = (r['429'] ?? 0) + (r['503'] ?? 0) + (r['529'] ?? 0);
      const refusedPct = refused / st.requests * 100, goodput = ok / capacity * 100;
      console.log(`#   5: flapping: ${ok} accepted of a capacity of ${capacity.toFixed(0)} over ${(last / 1000).toFixed(1)} s (goodput ${goodput.toFixed(1)} %), ` +
        `refused ${refused} of ${st.requests} upstream requests (${refusedPct.toFixed(1)} %: 429=${r['429'] ?? 0} 503=${r['503'] ?? 0} 529=${r['529'] ?? 0}); client statuses ${JSON.stringify(summarize(run).statuses)}`);
      const why = `\n${logDigest(p)}`;
      if (process.env.LEARN_TRACE) {
        const sec = {};
        for (const q of recs) { const s2 = Math.floor((q.t_mono_us / 1000 - Number(t0 / 1000000n)) / 1000); sec[s2] = (sec[s2] ?? 0) + 1; }
        console.log(`#   per second: ${Object.keys(sec).sort((a, b) => a - b).map((k) => `${k}:${sec[k]}`).join(' ')}`);
        for (const l of p.logs().filter((x) => ['retry', 'concurrency_changed'].includes(x.event))) console.log(`#   ${JSON.stringify(l).slice(0, 300)}`);
      }
      assert.ok(refusedPct <= 10, `refusals ${refusedPct.toFixed(1)} % of upstream requests (> 10 %)${why}`);
      assert.ok(goodput >= 80 / SLOW, `goodput ${goodput.toFixed(1)} % of the capacity (< 80 %)${why}`);
    },
  },
];
