// SPDX-License-Identifier: Apache-2.0
// The scheduler, never idle and never wasteful: open lanes until the provider pushes
// back, drift-free pacing, holds that start at the headers and end with one probe,
// quota answers that drain the queue. Each test has a mock of its own and a pacerd of
// its own; every figure is the mock's own count or its arrival times (t_mono_us).
import assert from 'node:assert/strict';
import { EXACT_BUCKET_429S, SLOW, VALGRIND, freePort, keyHash, request, sleep, streamRequest, tryConnect, waitFor } from '../lib.mjs';
import {
  chatBody, events, keyEntry, logDigest, median, percentile, runLoad, send, startPacerdFor, summarize,
} from '../load.mjs';

const chat = (key, extra = {}, body = {}) => () => ({
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...extra },
  body: chatBody({ max_tokens: 16, ...body }),
});

/** Arrival instants at the mock, ms (float), sorted. */
async function arrivals(mock) {
  return (await mock.requests()).map((r) => r.t_mono_us / 1000).sort((a, b) => a - b);
}

const gaps = (t) => t.slice(1).map((x, i) => x - t[i]);

// Run alone under run.mjs --jobs (nothing beside it): it measures intervals, first bytes and lockout windows to the millisecond.
// The tests marked 'light' (bounds of tens of ms, windows of a second or more) run beside
// other light timing tests; 2. and the 50 req/s lane of 1. alone (the mock's bucket of 2
// refused one or two of its 400 in two of three runs beside light tests).
export const alone = true;

export const tests = [
  {
    // 1. No limit configured, no capacity signal seen: the lane lets everything through
    // up to max_concurrent (64). 20 concurrent streams (5 chunks 100 ms apart) go to the
    // mock directly and through a fresh lane; then the same with 20 more streams already
    // running on the key (a busy lane; the direct round has the same 20 running against
    // the mock). Time to the first byte on a sub-millisecond clock, through minus direct
    // at the median, in 3 rounds that alternate the two paths; the figure is the median
    // of the 3 differences: issue 19's target is 3 ms (printed), asserted within 50 ms
    // for a loaded machine. One round alone swings by ±5 ms with the load generator
    // (20 requests from one Node process take 1-3 ms to leave it): traced per stage on
    // one clock, pacerd's own part of a busy-lane stream is ~1 ms from the parsed request
    // to the relayed first chunk. And not one request waited in the queue.
    alone: 'light',
    name: '1. a fresh or busy lane is open: 20 concurrent streams, none queued, first byte as fast as going direct (3 ms target, 50 ms bound)',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock);
      const streams = (base, key, n, chunks = 5) => Array.from({ length: n }, async () => {
        let first = null;
        const r = await streamRequest(`${base}/v1/chat/completions`, {
          body: chatBody({ max_tokens: 64, stream: true }),
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-mock-chunks': String(chunks), 'x-mock-chunk-ms': '100' },
          timeout_ms: 10000,
          onChunk: (c, ms) => { if (first === null && c.length > 0) first = ms; },
        });
        await r.done;
        assert.equal(r.status, 200);
        return { ms: first, queue: r.headers['x-pacer-queue-ms'] };
      });
      const round = (base, key) => Promise.all(streams(base, key, 20));
      const busy = async (base, key) => {
        const background = Promise.all(streams(base, key, 20, 10));
        await sleep(300);
        const r = await round(base, key);
        await background;
        return r;
      };
      await round(p.url, 'sk-open-warmup'); // pacerd's own warm-up, another lane
      const before = (await mock.stats()).in_flight_max;
      const ms = (rs) => median(rs.map((r) => r.ms));
      const fresh = [], busyd = [], queues = [];
      let st = null;
      for (let i = 0; i < 3; i++) {
        const d = await round(mock.url, `sk-open-direct-${i}`);
        const th = await round(p.url, `sk-open-fresh-lane-${i}`);
        if (i === 0) st = await mock.stats();
        const db = await busy(mock.url, `sk-open-direct-busy-${i}`);
        const tb = await busy(p.url, `sk-open-busy-lane-${i}`);
        fresh.push(ms(th) - ms(d));
        busyd.push(ms(tb) - ms(db));
        queues.push(...th.map((r) => r.queue), ...tb.map((r) => r.queue));
      }
      const f = (x) => x.toFixed(1);
      const msg = `TTFB through - direct, median of 3 rounds: fresh lane ${f(median(fresh))} ms (${fresh.map(f).join(', ')}), ` +
        `busy lane ${f(median(busyd))} ms (${busyd.map(f).join(', ')}); x-pacer-queue-ms ${[...new Set(queues)].join(',')}; ` +
        `mock in_flight_max ${st.in_flight_max} (before ${before})`;
      console.log(`#   1: ${msg}`);
      t.note?.(`1: ${msg}`);
      assert.ok(median(fresh) <= 50 * SLOW, `median TTFB through a fresh lane ${f(median(fresh))} ms over direct\n${logDigest(p)}`);
      assert.ok(median(busyd) <= 50 * SLOW, `median TTFB through a busy lane ${f(median(busyd))} ms over direct\n${logDigest(p)}`);
      assert.deepEqual([...new Set(queues)], ['0'], 'a request waited in the queue of an open lane');
      // debug lines: a request that had to wait in its lane. The warm-up's lane may have
      // some: the first lane of a provider not heard from yet sends 4 and waits for the
      // first answer's headers (a lane with no plan that may learn a small bucket from
      // them); its answers said they carry no rate-limit headers, so later lanes are open.
      const measured = new Set([0, 1, 2].flatMap((i) => [`sk-open-fresh-lane-${i}`, `sk-open-busy-lane-${i}`]).map(keyHash));
      const queued = events(p, 'queueing').filter((l) => measured.has(l.key));
      assert.equal(queued.length, 0, `queueing log lines: ${JSON.stringify(queued.slice(0, 3))}`);
      assert.ok(st.in_flight_max >= 20, `the mock saw at most ${st.in_flight_max} streams at once`);
    },
  },
  {
    // 1. A rate-limited lane: concurrency is never why the rate is not reached. 50 req/s
    // plan, 150 ms upstream latency, 25 clients: 7.5 requests in flight are needed, more
    // than the old starting limit of 4 (which held it to ~27 req/s). The mock enforces
    // 50 req/s itself (a bucket of 2: one request of timer slack; no rate-limit headers:
    // the subject here is the concurrency, not learning).
    name: '1. a lane limited to 50 req/s with 150 ms latency and 25 clients: >= 48 req/s from the first second on, no 429',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 3000, burst: 2, latency_ms: 150, headers: false } });
      const key = 'sk-open-rate-0001';
      const p = await startPacerdFor(t, mock, { plans: { r50: { max_requests_per_second: 50 } }, keys: [keyEntry(key, 'r50')] });
      const run = await runLoad({ base: p.url, n: 400, concurrency: 25, makeRequest: chat(key), deadline_ms: 20000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const at = await arrivals(mock);
      const perSecond = [];
      for (let s = at[0]; s + 1000 <= at[at.length - 1]; s += 1000) perSecond.push(at.filter((x) => x >= s && x < s + 1000).length);
      console.log(`#   1: arrivals per second from the first: ${perSecond.join(', ')}; mock responses ${JSON.stringify(st.responses)} in_flight_max ${st.in_flight_max}; statuses ${JSON.stringify(sum.statuses)}`);
      assert.equal(sum.client_errors, 0, `client errors: ${JSON.stringify(sum.statuses)}`);
      assert.ok((st.responses['429'] ?? 0) <= EXACT_BUCKET_429S, `upstream 429s: ${JSON.stringify(st.responses)}`);
      assert.ok(perSecond.length >= 7, `only ${perSecond.length} whole seconds of arrivals`);
      for (const [i, n] of perSecond.entries()) assert.ok(n >= 48 / SLOW, `second ${i + 1}: ${n} arrivals (< 48)\n${logDigest(p)}`);
    },
  },
  {
    // 2. Pacing without drift at 50 req/s: a late timer (a millisecond or two) must not be
    // added to every interval. 300 requests from 40 clients; the mock bucket (50 req/s,
    // holding 3, no rate-limit headers) answers 429 to anything faster than the plan
    // beyond one request of slack. The plan has a burst of 2: the schedule is kept
    // within what that burst forgives (a plan of burst 1 spaces strictly instead, every
    // gap at least 20 ms and the mean a little above: precision.mjs).
    // The issue's target for the jitter is p99 <= 2 ms (printed; 0.3-2.5 ms measured here,
    // 2.8 ms in a fresh podman container, 3.3-4 ms before precise timers); the assertion
    // allows 5 ms, since the load generator, the mock and pacerd share two cores. The
    // drift (the mean) is asserted at the issue's 1 %: 21.3 ms before, 20.00 now.
    name: '2. 50 req/s: mean interval at the mock within 1 % of 20 ms, p99 |interval - 20 ms| <= 5 ms, no 429',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 3000, burst: 3, headers: false } });
      const key = 'sk-drift-50-0001';
      const p = await startPacerdFor(t, mock, { plans: { r50: { max_requests_per_second: 50, burst: 2 } }, keys: [keyEntry(key, 'r50')] });
      const run = await runLoad({ base: p.url, n: 300, concurrency: 40, makeRequest: chat(key), deadline_ms: 20000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const g = gaps(await arrivals(mock)).slice(1); // the first two leave together (the burst)
      const mean = g.reduce((a, b) => a + b, 0) / g.length;
      const dev = percentile(g.map((x) => Math.abs(x - 20)), 99);
      console.log(`#   2: 50 req/s: mean interval ${mean.toFixed(3)} ms, p99 |interval - 20| ${dev.toFixed(3)} ms, min ${Math.min(...g).toFixed(2)} max ${Math.max(...g).toFixed(2)}; mock ${JSON.stringify(st.responses)}`);
      assert.equal(sum.client_errors, 0, JSON.stringify(sum.statuses));
      assert.ok((st.responses['429'] ?? 0) <= EXACT_BUCKET_429S, `upstream 429s: ${JSON.stringify(st.responses)}`);
      // Under valgrind pacerd cannot take 50 requests a second from 40 clients at all
      // (44.8 ms measured): the spacing is valgrind's, not the gate's, and only the
      // gate's own side holds (never faster than the plan). make test holds the rest.
      if (VALGRIND) {
        assert.ok(mean >= 20 * 0.99, `mean interval ${mean.toFixed(3)} ms: faster than the plan's 20 ms`);
      } else {
        assert.ok(Math.abs(mean - 20) <= 0.2 * SLOW, `mean interval ${mean.toFixed(3)} ms (20 ms ± 1 %)`);
        assert.ok(dev <= 5 * SLOW, `p99 |interval - 20 ms| = ${dev.toFixed(3)} ms (> 5 ms)`);
      }
    },
  },
  {
    // 2. The same for the token gate: each request costs 13 tokens (32 characters / 4 +
    // max_tokens 5; the mock's usage says 13 too, so no correction moves the gate) and the
    // plan allows 39 000 tokens per minute, 26 at once (two requests' worth, as above):
    // 50 requests per second.
    name: '2. token gate at 50 req/s worth of tokens: mean interval within 1 % of 20 ms, p99 deviation <= 5 ms',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const key = 'sk-drift-tpm-0001';
      const p = await startPacerdFor(t, mock, { plans: { t50: { max_tokens_per_minute: 39000, token_burst: 26 } }, keys: [keyEntry(key, 't50')] });
      const run = await runLoad({ base: p.url, n: 300, concurrency: 40, makeRequest: chat(key, {}, { max_tokens: 5 }), deadline_ms: 20000 });
      const sum = summarize(run);
      const g = gaps(await arrivals(mock)).slice(1); // the first two leave together (the burst)
      const mean = g.reduce((a, b) => a + b, 0) / g.length;
      const dev = percentile(g.map((x) => Math.abs(x - 20)), 99);
      console.log(`#   2: token gate: mean interval ${mean.toFixed(3)} ms, p99 |interval - 20| ${dev.toFixed(3)} ms, min ${Math.min(...g).toFixed(2)} max ${Math.max(...g).toFixed(2)}`);
      assert.equal(sum.client_errors, 0, JSON.stringify(sum.statuses));
      // Under valgrind pacerd cannot take 50 requests a second from 40 clients at all
      // (44.8 ms measured): the spacing is valgrind's, not the gate's, and only the
      // gate's own side holds (never faster than the plan). make test holds the rest.
      if (VALGRIND) {
        assert.ok(mean >= 20 * 0.99, `mean interval ${mean.toFixed(3)} ms: faster than the plan's 20 ms`);
      } else {
        assert.ok(Math.abs(mean - 20) <= 0.2 * SLOW, `mean interval ${mean.toFixed(3)} ms (20 ms ± 1 %)`);
        assert.ok(dev <= 5 * SLOW, `p99 |interval - 20 ms| = ${dev.toFixed(3)} ms (> 5 ms)`);
      }
    },
  },
  {
    // 2. Burst 1 is exact (issue 19): a plan of 600 RPM with the default burst of 1 in front
    // of a provider that enforces exactly 600 RPM with no burst at all (a bucket of one
    // request, refilled every 100 ms, no rate-limit headers: nothing to learn). 150
    // requests from 30 clients: no two may reach it closer than 100 ms, or it refuses.
    // Before: a dispatch late by up to 10 ms was counted on schedule, and the schedule ran
    // from the decision, not from the send: 5 refusals in 300 requests at 9.43 req/s (each
    // refusal also holds the lane); the issue measured 33 at 7.8 req/s. Now: 0 refusals at
    // ~9.85 req/s (the 1 % margin beyond T, and the send's own fraction of a millisecond).
    // A warm-up request on another key opens the upstream connection first: the first
    // request of a new connection reaches the mock's handler ~1-2 ms later after its send
    // than one on a warm connection (the mock's accept), which no sender can see.
    name: '2. burst 1 is exact: 600 RPM against a bucket of one, 150 requests from 30 clients: no 429, rate within 2 % of 10 req/s',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600, burst: 1, headers: false } });
      const key = 'sk-exact-600-0001';
      const p = await startPacerdFor(t, mock, { plans: { r600: { max_requests_per_minute: 600 } }, keys: [keyEntry(key, 'r600')] });
      const warm = await send(`${p.url}/v1/chat/completions`, { headers: { authorization: 'Bearer sk-exact-warm-0001', 'content-type': 'application/json' }, body: chatBody() });
      assert.equal(warm.status, 200);
      await mock.reset();
      const run = await runLoad({ base: p.url, n: 150, concurrency: 30, makeRequest: chat(key), deadline_ms: 30000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const at = await arrivals(mock);
      const g = gaps(at);
      const rate = (at.length - 1) / ((at[at.length - 1] - at[0]) / 1000);
      console.log(`#   2: burst 1: ${at.length} arrivals at ${rate.toFixed(3)} req/s, min gap ${Math.min(...g).toFixed(3)} ms, ` +
        `p1 ${percentile(g, 1).toFixed(3)} ms; mock ${JSON.stringify(st.responses)}; statuses ${JSON.stringify(sum.statuses)}`);
      assert.equal(sum.client_errors, 0, JSON.stringify(sum.statuses));
      // 0 in most runs (min gap 100.8-101.0 ms). This machine is a VM on a shared host: at
      // times the mock reads an arrival 1-2 ms late whatever its priority (min gaps of
      // 99.3-99.5 ms with 1 refusal came and went with the hour, for the build from before
      // this session's merges too); run.mjs runs a failed timing test once more.
      assert.ok((st.responses['429'] ?? 0) <= EXACT_BUCKET_429S, `upstream 429s from a bucket of one: ${JSON.stringify(st.responses)}\n${logDigest(p)}`);
      assert.ok(rate <= 10 * 1.02, `${rate.toFixed(3)} req/s: faster than 600 RPM`);
      // Under valgrind a loop turn can take longer than the 100 ms spacing: a lower floor.
      const floor = VALGRIND ? 0.8 : 0.98;
      assert.ok(rate >= 10 * floor, `${rate.toFixed(3)} req/s: more than ${Math.round((1 - floor) * 100)} % below 600 RPM`);
    },
  },
  {
    // 3. A provider that punishes: after a 429 it refuses every request of the key for
    // 1 s (retry-after: 1, retry-after-ms: 1000), and each request inside that window is
    // refused again and starts the window over. No rate-limit headers, 100 ms latency:
    // pacerd holds the lane from the first 429's headers, follows every later window,
    // and ends the hold with one request alone. Four runs, each with a fresh mock and a
    // fresh pacerd: the issue's 10 clients (no plan), and 20 clients on a lane of 4 slots,
    // where every answer frees a slot for a waiting request, so 200s and 429s of one
    // batch arrive together.
    // What counts as inside a window (the mock's window_violations): an arrival at or
    // after the instant the 429 left the mock (to the microsecond) and before its window
    // ends, except within window_grace_ms (3 ms) of a window opening. The rule: a request
    // already on the wire when the 429 left cannot be recalled by any proxy, and the grace
    // covers only that (loopback and the mock's own turn: measured 0.1-0.5 ms here, and
    // beyond 1 ms once in a loaded podman container, where a 1 ms grace failed run 3 of
    // one make test; the early probe this case guards against lands at a window's end,
    // where no grace applies); a request
    // pacerd dispatched after the 429 was in its hands must never arrive inside. The
    // latency keeps the first burst (all dispatched before any answer) out of the count:
    // it reaches the mock before the first window opens.
    // Measured before (ce990c8, this mock), three times: 0, 3, 0, 5; 0, 0, 0, 6; 0, 2, 0, 0.
    // The probe that ended a hold left up to 1 ms early (the hold counted from the
    // millisecond clock's truncated arrival of the 429) and, with lockout, each early probe
    // started the window over (runs of 14 s instead of 6.5); and a request was dispatched
    // while a 429 sat unread next to the 200 that freed its slot (the 4-slot runs). With
    // only the first fixed: 0, 0, 1, 0 once in three; only the second: 0, 1, 0, 0 and
    // 0, 0, 5, 5. After: 0 in all 28 runs of seven tests. (The suite's case before this
    // one, no latency and a 20 ms grace, passed on either build.)
    alone: 'light',
    name: '3. holds start at the headers and end with one probe: 0 requests inside a lockout window in 4 runs, all succeed',
    timeout_ms: 60000,
    fn: async (t) => {
      const key = 'sk-holds-0001';
      const runs = [
        { clients: 10, n: 30, burst: 8 },
        { clients: 4, n: 40, burst: 4 },
        { clients: 20, n: 40, burst: 8, slots: 4 },
        { clients: 4, n: 40, burst: 4 },
      ];
      const seen = [];
      for (const [i, r] of runs.entries()) {
        const mock = await t.startMock({ config: { style: 'openai', rpm: 480, burst: r.burst, headers: false, retry_after_s: 1, lockout: true, latency_ms: 100, window_grace_ms: 3 } });
        const p = await startPacerdFor(t, mock, r.slots ? { plans: { four: { max_concurrent: r.slots } }, keys: [keyEntry(key, 'four')] } : {});
        const run = await runLoad({ base: p.url, n: r.n, concurrency: r.clients, makeRequest: chat(key), deadline_ms: 20000 });
        const sum = summarize(run);
        const st = await mock.stats();
        console.log(`#   3: run ${i + 1} (${r.clients} clients, bucket ${r.burst}${r.slots ? `, ${r.slots} slots` : ''}): window_violations=${st.window_violations} ` +
          `mock responses ${JSON.stringify(st.responses)}; client statuses ${JSON.stringify(sum.statuses)}; wall ${(run.wall_ms / 1000).toFixed(2)} s`);
        seen.push({ run: i + 1, violations: st.window_violations, refused: st.rate_limited, ok: sum.ok, n: r.n, digest: st.window_violations ? logDigest(p) : '' });
        await p.stop();
        await mock.stop();
      }
      for (const s of seen) {
        assert.ok(s.refused >= 1, `run ${s.run}: the mock never refused: the scenario tested nothing`);
        assert.equal(s.ok, s.n, `run ${s.run}: ${s.ok} of ${s.n} succeeded`);
      }
      const bad = seen.filter((s) => s.violations > 0);
      assert.equal(bad.length, 0, `requests inside a lockout window: ${seen.map((s) => s.violations).join(', ')} in runs 1-4\n${bad.map((s) => s.digest).join('\n')}`);
    },
  },
  {
    // 3. A hold ends with one probe. The provider (10 req/s, a bucket of 1, 300 ms latency)
    // refuses for 1 s after each 429 (retry-after: 1; every request inside that window is
    // refused again and starts it over; the window opens when the 429 leaves), and another
    // client of the same key (outside pacerd) hits it just before pacerd's hold ends: the
    // window is still closed when the retry-after has elapsed. pacerd then sends one
    // request (refused, held again) and waits for its answer, instead of letting requests
    // follow it into the window while that answer is on its way. Counted by the mock:
    // window violations are the outside client's own and pacerd's one probe, no more
    // (the build before this issue: 3 in three runs out of three).
    alone: 'light',
    name: '3. a hold ends with one probe: a window still closed at its end costs one refused request, not the lane',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600, burst: 1, headers: false, retry_after_s: 1, lockout: true, window_grace_ms: 20, latency_ms: 300 } });
      const p = await startPacerdFor(t, mock);
      const key = 'sk-probe-0001';
      const hdrs = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const first = await send(`${p.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 5000 });
      assert.equal(first.status, 200); // the bucket is empty now
      const t0 = Date.now();
      const six = Array.from({ length: 6 }, () => send(`${p.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 30000 }));
      await sleep(800 - (Date.now() - t0));
      const outside = await send(`${mock.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 5000 });
      const done = await Promise.all(six);
      const st = await mock.stats();
      console.log(`#   3: outside client at +800 ms: ${outside.status}; pacerd's six: ${JSON.stringify(done.map((r) => r.status))} ` +
        `after ${Date.now() - t0} ms; mock responses ${JSON.stringify(st.responses)} window_violations=${st.window_violations}; probes ${events(p, 'retry').length} retry lines`);
      assert.equal(outside.status, 429, 'the outside request did not meet the window: the scenario did not happen');
      assert.deepEqual(done.map((r) => r.status), [200, 200, 200, 200, 200, 200]);
      assert.ok(st.window_violations <= 2, `${st.window_violations} requests inside a window (the outside one and one probe at most)\n${logDigest(p)}`);
    },
  },
  {
    // 3. The hold starts at the headers: a 429 whose headers say retry-after: 2 and whose
    // body never comes (x-mock-hang: body) holds the lane for the 2 s at once; a 503
    // without a hint and without a body holds it until the body is decided, 1 s at most
    // (a body that never comes must not stall the lane). Asserted from the mock's
    // arrival times of the next request of the same key, sent 200 ms later.
    alone: 'light',
    name: '3. a capacity answer holds the lane from its headers: retry-after 2 s without a body; 1 s at most without a hint',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock);
      const hdrs = (key, extra) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json', ...extra });
      const pair = async (key, extra) => {
        const first = send(`${p.url}/v1/chat/completions`, { headers: hdrs(key, extra), body: chatBody(), timeout_ms: 3500 });
        await sleep(200);
        const second = await send(`${p.url}/v1/chat/completions`, { headers: hdrs(key, {}), body: chatBody(), timeout_ms: 8000 });
        await first;
        const recs = (await mock.requests()).filter((r) => r.headers.some(([n, v]) => n.toLowerCase() === 'authorization' && v === `Bearer ${key}`));
        assert.equal(recs.length, 2, `mock records for ${key}: ${recs.length}`);
        return { second, gap: (recs[1].t_mono_us - recs[0].t_mono_us) / 1000 };
      };
      const a = await pair('sk-hold-hdr-0001', { 'x-mock-status': '429', 'x-mock-header': 'retry-after: 2', 'x-mock-hang': 'body' });
      const b = await pair('sk-hold-hdr-0002', { 'x-mock-status': '503', 'x-mock-hang': 'body' });
      console.log(`#   3: next request reached the mock ${a.gap.toFixed(0)} ms after a 429 (retry-after 2, no body) and ${b.gap.toFixed(0)} ms after a 503 (no hint, no body)`);
      assert.equal(a.second.status, 200, `${a.second.status} ${a.second.body}`);
      assert.equal(b.second.status, 200, `${b.second.status} ${b.second.body}`);
      assert.ok(a.gap >= 2000 - 5, `the next request left ${a.gap} ms after a 429 with retry-after: 2 (its body never came)`);
      assert.ok(a.gap <= 3000 * SLOW, `the next request left ${a.gap} ms after the 429: held too long`);
      assert.ok(b.gap >= 1000 - 5, `the next request left ${b.gap} ms after a 503 whose body was not there yet`);
      assert.ok(b.gap <= 1800 * SLOW, `the next request left ${b.gap} ms after the 503: the pending hold is 1 s at most`);
    },
  },
  {
    // 4. Every upstream answer is 429 insufficient_quota (50 ms latency). 20 requests from
    // 5 clients on a 600 RPM lane: the first answer drains the queue at once, and the
    // later requests get it from pacerd without an upstream call; then the mock recovers,
    // and within the probe interval (quota_probe_s: 2) a probe goes up and the lane opens.
    alone: 'light',
    name: '4. a quota answer drains the lane: every client gets the 429 at once, <= 1 upstream call each; a probe reopens it',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', quota_exhausted: true, latency_ms: 50 } });
      const aport = await freePort();
      const key = 'sk-quota-0001';
      const p = await startPacerdFor(t, mock, {
        admin: { listen: `127.0.0.1:${aport}` },
        plans: { q: { max_requests_per_minute: 600, quota_probe_s: 2 } }, keys: [keyEntry(key, 'q')],
      });
      const run = await runLoad({ base: p.url, n: 20, concurrency: 5, makeRequest: chat(key), deadline_ms: 10000 });
      const st = await mock.stats();
      const lat = run.results.map((r) => r.end - r.start);
      console.log(`#   4: statuses ${JSON.stringify(summarize(run).statuses)}; upstream calls ${st.requests}; latency p50 ${median(lat)} p99 ${percentile(lat, 99)} max ${Math.max(...lat)} ms`);
      for (const r of run.results) {
        assert.equal(r.status, 429, `#${r.i}: ${r.status} ${r.error ?? r.body}`);
        assert.equal(JSON.parse(r.body).error?.code, 'insufficient_quota', r.body);
        assert.equal(r.headers['x-should-retry'], 'false', `#${r.i}: x-should-retry ${r.headers['x-should-retry']}`);
      }
      assert.ok(st.requests <= 20, `${st.requests} upstream calls for 20 requests`);
      assert.ok(percentile(lat, 99) <= (50 + 50) * SLOW, `p99 latency ${percentile(lat, 99)} ms > the mock's 50 ms + 50 ms`);
      const ex = events(p, 'quota_exhausted');
      assert.equal(ex.length, 1, `quota_exhausted lines: ${JSON.stringify(ex)}`);
      await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 5000 * SLOW, what: 'the admin port' });
      const lane = JSON.parse((await request(`http://127.0.0.1:${aport}/status`)).body).lanes.find((l) => l.key.startsWith(keyHash(key).slice(0, 6)));
      assert.equal(lane?.state, 'quota_exhausted', `/status lane: ${JSON.stringify(lane)}`);
      // The account is topped up: within the probe interval (+1 s), requests succeed.
      await mock.configure({ style: 'openai', latency_ms: 50 });
      const t0 = Date.now();
      let ok = null;
      for (let i = 0; i < 40 && ok === null; i++) {
        const r = await send(`${p.url}/v1/chat/completions`, { headers: chat(key)().headers, body: chatBody({ max_tokens: 16 }), timeout_ms: 5000 });
        if (r.status === 200) ok = Date.now() - t0;
        else await sleep(100);
      }
      console.log(`#   4: after the mock recovered: first 200 after ${ok} ms`);
      assert.ok(ok !== null && ok <= 3000 * SLOW, `no 200 within 3 s of the recovery (probe interval 2 s): ${ok}`);
      await waitFor(() => events(p, 'quota_restored').length === 1, { timeout_ms: 2000 * SLOW, what: 'one quota_restored line' });
      const after = JSON.parse((await request(`http://127.0.0.1:${aport}/status`)).body).lanes.find((l) => l.key.startsWith(keyHash(key).slice(0, 6)));
      assert.notEqual(after?.state, 'quota_exhausted', JSON.stringify(after));
    },
  },
];
