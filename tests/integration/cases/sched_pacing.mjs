// SPDX-License-Identifier: Apache-2.0
// Scheduler scenarios with configured plans: a. 10 req/s paced evenly over 30 s without drift,
// e. a slow key does not slow a fast key, k. streams through open gates are not delayed.
// Each test has a mock of its own (its /_mock/config must not leak into other files)
// and a pacerd of its own; figures are taken from the mock's own counts.
import assert from 'node:assert/strict';
import { EXACT_BUCKET_429S, SLOW, keyHash, recHeader, streamRequest } from '../lib.mjs';
import {
  chatBody, keyEntry, logDigest, median, percentile, runLoad, scenarioLine, sleep, startPacerdFor, summarize,
} from '../load.mjs';

const chat = (key, extra = {}) => () => ({
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...extra },
  body: chatBody({ max_tokens: 16 }),
});

/** Largest number of mock arrivals (t_ms) inside any window of `ms`. */
function maxInWindow(times, ms) {
  const s = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < s.length; i++) {
    while (s[i] - s[j] >= ms) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

// Run alone under run.mjs --jobs (nothing beside it): it measures rates within 1.5 % of a plan at an exact bucket.
// The tests marked 'light' (bounds of 10 % or 20 ms) run beside other light timing tests.
export const alone = true;

export const tests = [
  {
    // a. 150 requests at max_requests_per_second: 10 (one every 100 ms, burst 1) from 40
    // clients: the first leaves at t=0, the last at ~15 s (300 requests before issue 19;
    // halved to keep make test under its time: sched_quality's burst-1 case covers the
    // same gate against a bucket of one). The mock enforces exactly
    // 10 req/s per key with a bucket of 2 (one request of timer slack) and no rate-limit
    // headers: anything faster than the plan is a 429. The rate over the run (149
    // intervals between the first and the last arrival) is >= 98.5 % of 10 req/s: burst 1
    // is strict (issue 19: no two sends closer than 100 ms, each interval 1 % longer for
    // the network and the provider's receiving, and the send's own fraction of a
    // millisecond: 98.9 % measured; 99.9 % before, when a late dispatch could keep the
    // schedule and leave the next one up to 10 ms early; a gate restarting from every
    // late timer at millisecond precision made it 9.7).
    name: 'a. 10 req/s plan, 40 clients, 150 requests: no error, no upstream 429 from an exact 10 req/s bucket, rate >= 98.5 % of the plan',
    timeout_ms: 50000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600, burst: 2, headers: false } });
      const p = await startPacerdFor(t, mock, { plans: { default: { max_requests_per_second: 10 } } });
      const key = 'sk-scen-a-0001';
      const run = await runLoad({ base: p.url, n: 150, concurrency: 40, makeRequest: chat(key), deadline_ms: 25000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const recs = await mock.requests();
      const up429 = st.responses['429'] ?? 0;
      scenarioLine('a', { sum, wall_ms: run.wall_ms, limit_rps: 10, upstream429: up429, sent: 150 });
      const at = recs.map((r) => r.t_mono_us / 1000).sort((x, y) => x - y);
      const rate = (at.length - 1) / ((at[at.length - 1] - at[0]) / 1000);
      const per1s = maxInWindow(recs.map((r) => r.t_ms), 1000);
      console.log(`#   a: mock requests=${st.requests}, statuses=${JSON.stringify(sum.statuses)}, rate over the run ${rate.toFixed(4)} req/s ` +
        `(${(rate / 10 * 100).toFixed(2)} % of the plan), max arrivals in any 1 s=${per1s}, in_flight_max=${st.in_flight_max}`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of 150 requests answered within the 25 s bound: ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
      assert.ok(up429 <= EXACT_BUCKET_429S, `upstream 429s: ${up429}${why}`);
      assert.equal(st.requests, 150, 'upstream requests');
      assert.ok(rate >= 10 * 0.985 / SLOW, `rate over the run ${rate.toFixed(4)} req/s (< 98.5 % of 10)`);
      assert.ok(rate <= 10 * 1.005, `rate over the run ${rate.toFixed(4)} req/s: above the plan`);
      // Burst 1: evenly spaced, at most ~10 in any second (11: burst + 10 in a closed window, and clock slack).
      assert.ok(per1s <= 11, `${per1s} requests reached the mock within one second (10 req/s, burst 1)`);
    },
  },
  {
    // e. Two keys in one pacerd, a slow one (5 rps plan) and a fast one (50 rps plan); the
    // mock has no limit. The fast key's throughput is measured alone, then while the slow
    // key is saturated by 20 clients: lanes are independent, so it stays within 10 %.
    // (The scenario line's "mock's limit" is here the fast key's plan, 50 rps.)
    alone: 'light',
    name: 'e. a saturated slow key (5 rps) leaves a fast key (50 rps) within 10 % of its throughput alone',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const slowKey = 'sk-scen-e-slow';
      const fastKey = 'sk-scen-e-fast';
      const p = await startPacerdFor(t, mock, {
        plans: { slow: { max_requests_per_second: 5 }, fast: { max_requests_per_second: 50 } },
        keys: [keyEntry(slowKey, 'slow'), keyEntry(fastKey, 'fast')],
      });
      const fastRun = () => runLoad({ base: p.url, n: 150, concurrency: 10, makeRequest: chat(fastKey), deadline_ms: 12000 });
      const alone = await fastRun();
      const sumAlone = summarize(alone);
      await sleep(300); // the fast lane's gate is idle again
      const slowP = runLoad({ base: p.url, n: 25, concurrency: 20, makeRequest: chat(slowKey), deadline_ms: 12000 });
      await sleep(300);
      const together = await fastRun();
      const slow = await slowP;
      const sumT = summarize(together);
      const sumS = summarize(slow);
      const st = await mock.stats();
      const rpsAlone = sumAlone.ok / (alone.wall_ms / 1000);
      const rpsTogether = sumT.ok / (together.wall_ms / 1000);
      const rpsSlow = sumS.ok / (slow.wall_ms / 1000);
      scenarioLine('e', { sum: sumT, wall_ms: together.wall_ms, limit_rps: 50, upstream429: st.responses['429'] ?? 0, sent: 325 });
      console.log(`#   e: fast alone ${rpsAlone.toFixed(1)} rps (wall ${(alone.wall_ms / 1000).toFixed(2)} s), fast with slow ${rpsTogether.toFixed(1)} rps ` +
        `(wall ${(together.wall_ms / 1000).toFixed(2)} s), slow ${rpsSlow.toFixed(2)} rps; mock keys ${JSON.stringify(st.keys)}`);
      assert.equal(sumAlone.client_errors + sumT.client_errors + sumS.client_errors, 0,
        `client errors: alone ${JSON.stringify(sumAlone.statuses)} together ${JSON.stringify(sumT.statuses)} slow ${JSON.stringify(sumS.statuses)}`);
      // What the slow key must not do is slow the fast one down. (The first run,
      // alone, may be the slower one: under valgrind it pays for translating
      // every code path the first time.) Faster than its plan it can never be.
      assert.ok(rpsTogether >= 0.9 * rpsAlone,
        `fast key: ${rpsTogether.toFixed(1)} rps next to the slow key vs ${rpsAlone.toFixed(1)} rps alone (more than 10 % slower)`);
      assert.ok(rpsTogether <= 50 * 1.02, `fast key: ${rpsTogether.toFixed(1)} rps, above its 50 rps plan`);
      // Each plan is respected (+10 % slack: burst 1, the first request of a run is free).
      assert.ok(rpsAlone <= 55, `fast key ran at ${rpsAlone.toFixed(1)} rps with a 50 rps plan`);
      assert.ok(rpsSlow <= 5.5, `slow key ran at ${rpsSlow.toFixed(2)} rps with a 5 rps plan`);
      assert.equal(st.keys[keyHash(fastKey)]?.requests, 300, 'fast key upstream requests');
      assert.equal(st.keys[keyHash(slowKey)]?.requests, 25, 'slow key upstream requests');
    },
  },
  {
    // k. A lane whose gates are all configured but open (100 rps, 6000 RPM, 1M TPM; requests
    // 40 ms apart, a few dozen tokens each) must not add latency: its time to the first
    // streamed byte is compared, in the same run and interleaved, with a lane without any
    // limit (the unpaced path) and with the mock directly.
    alone: 'light',
    name: 'k. stream through open gates: time to first byte within 20 ms of the unpaced path',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock();
      const pacedKey = 'sk-scen-k-paced';
      const p = await startPacerdFor(t, mock, {
        plans: { paced: { max_requests_per_second: 100, max_requests_per_minute: 6000, max_tokens_per_minute: 1000000 } },
        keys: [keyEntry(pacedKey, 'paced')],
      });
      const ttfb = async (base, key) => {
        let first = null;
        const r = await streamRequest(`${base}/v1/chat/completions`, {
          body: chatBody({ max_tokens: 16, stream: true }),
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-mock-chunks': '3' },
          timeout_ms: 5000,
          onChunk: (c, ms) => { if (first === null && c.length > 0) first = ms; },
        });
        await r.done;
        assert.equal(r.status, 200);
        return { ms: first, queue: Number(r.headers['x-pacer-queue-ms']) };
      };
      // Warm-up (lanes created, connections to the mock pooled).
      await ttfb(p.url, pacedKey);
      await ttfb(p.url, 'sk-scen-k-free');
      await sleep(40); // the paced lane's 10 ms gate is open again
      const paced = [], free = [], direct = [], pacedQueue = [];
      for (let i = 0; i < 25; i++) {
        const a = await ttfb(p.url, pacedKey);
        paced.push(a.ms);
        pacedQueue.push(a.queue);
        await sleep(40);
        free.push((await ttfb(p.url, 'sk-scen-k-free')).ms);
        direct.push((await ttfb(mock.url, 'sk-scen-k-direct')).ms);
        await sleep(40);
      }
      const f = (v) => `median ${median(v)} ms, p90 ${percentile(v, 90)} ms, max ${Math.max(...v)} ms`;
      console.log(`#   k: TTFB paced lane: ${f(paced)}; unpaced lane: ${f(free)}; mock direct: ${f(direct)}; paced x-pacer-queue-ms max ${Math.max(...pacedQueue)}`);
      assert.ok(median(paced) - median(free) <= 20 * SLOW,
        `median TTFB through open gates ${median(paced)} ms vs ${median(free)} ms unpaced\n${logDigest(p)}`);
      assert.ok(percentile(paced, 90) - percentile(free, 90) <= 20 * SLOW,
        `p90 TTFB through open gates ${percentile(paced, 90)} ms vs ${percentile(free, 90)} ms unpaced`);
    },
  },
  {
    // Input and output token limits apart (issue 8.5; Anthropic limits them apart). The mock
    // enforces 600 000 input and 600 000 output tokens per minute per key, each a bucket of
    // one second's worth (10 000), without rate-limit headers; pacerd's plan is 95 % of
    // that (570 000 each, as one configures a limit with a margin). Requests with a
    // 1000-token prompt and 10 tokens out are paced by pacerd's input gate, requests with
    // an 8-token prompt and 1000 out by its output gate: 9.5 req/s each, 0 upstream 429s.
    // The control: one total gate of 1 140 000 tokens/min lets almost twice as many long
    // prompts through per second, and the mock refuses them.
    alone: 'light',
    name: 'input and output token gates: long prompts paced by the input gate, long answers by the output gate, no 429',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', itpm: 600000, otpm: 600000, headers: false } });
      const inKey = 'sk-io-input-0001', outKey = 'sk-io-output-0001', totalKey = 'sk-io-total-0001';
      const p = await startPacerdFor(t, mock, {
        plans: {
          io: { max_input_tokens_per_minute: 570000, max_output_tokens_per_minute: 570000 },
          total: { max_tokens_per_minute: 1140000, retry: { max_attempts: 1, deadline_s: 1 } },
        },
        keys: [keyEntry(inKey, 'io'), keyEntry(outKey, 'io'), keyEntry(totalKey, 'total')],
      });
      const longPrompt = 'abcd'.repeat(1000); // 4000 characters: 1000 tokens
      const req = (key, content, max_tokens) => () => ({
        path: '/v1/chat/completions',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-mock-chunks': String(max_tokens) },
        body: chatBody({ max_tokens, content }),
      });
      const rate = async (key) => {
        const recs = (await mock.requests()).filter((r) => recHeader(r, 'authorization') === `Bearer ${key}`);
        const at = recs.map((r) => r.t_mono_us / 1000).sort((a, b) => a - b);
        // after the first second's worth (9 at once), one every 105 ms
        return (at.length - 9) / ((at[at.length - 1] - at[8]) / 1000);
      };
      const before = async () => (await mock.stats()).responses['429'] ?? 0;
      const runIn = await runLoad({ base: p.url, n: 40, concurrency: 10, makeRequest: req(inKey, longPrompt, 10), deadline_ms: 15000 });
      const in429 = await before();
      const runOut = await runLoad({ base: p.url, n: 40, concurrency: 10, makeRequest: req(outKey, 'Say hello to the scheduler test.', 1000), deadline_ms: 15000 });
      const out429 = (await before()) - in429;
      const rIn = await rate(inKey), rOut = await rate(outKey);
      const control = await runLoad({ base: p.url, n: 40, concurrency: 10, makeRequest: req(totalKey, longPrompt, 10), deadline_ms: 15000 });
      const ctl429 = (await before()) - in429 - out429;
      console.log(`#   io: long prompts ${rIn.toFixed(2)} req/s after the first second, 429s ${in429}; long answers ${rOut.toFixed(2)} req/s, 429s ${out429}; ` +
        `control (one total gate): ${ctl429} upstream 429s, client statuses ${JSON.stringify(summarize(control).statuses)}`);
      assert.equal(summarize(runIn).ok, 40, JSON.stringify(summarize(runIn).statuses));
      assert.equal(summarize(runOut).ok, 40, JSON.stringify(summarize(runOut).statuses));
      assert.ok(in429 <= EXACT_BUCKET_429S, `upstream 429s for long prompts: ${in429}`);
      assert.ok(out429 <= EXACT_BUCKET_429S, `upstream 429s for long answers: ${out429}`);
      assert.ok(rIn >= 9 / SLOW && rIn <= 10, `long prompts at ${rIn.toFixed(2)} req/s (input gate: 9.5)`);
      assert.ok(rOut >= 9 / SLOW && rOut <= 10, `long answers at ${rOut.toFixed(2)} req/s (output gate: 9.5)`);
      assert.ok(ctl429 > 0, 'the control met no 429: the mock does not enforce input tokens apart');
    },
  },
];
