// SPDX-License-Identifier: Apache-2.0
// Retry scenarios: d. a retry-after window is honoured by the whole lane, f. a 429 for
// money is relayed at once, never retried.
// Each test has a mock of its own and a pacerd of its own; figures are the mock's counts.
import assert from 'node:assert/strict';
import { SLOW, keyHash, recHeader } from '../lib.mjs';
import { chatBody, events, logDigest, runLoad, send, startPacerdFor, summarize } from '../load.mjs';

// d. runs apart under run.mjs --jobs: it measures arrivals inside a retry-after window. Light
// (8 clients, one request in flight): beside other light timing tests only.
export const tests = [
  {
    // d. The mock: 60 RPM per key (bucket of 60, refilling 1/s) and every rate-limit 429
    // advertises `retry-after: 3` (window 3 s); no rate-limit headers, so pacerd cannot
    // foresee the limit and must meet 429s (asserted: rate_limited ≥ 1, else the
    // assertion below would be vacuous). 8 clients send 72 requests: 60 pass at once, the
    // other 12 need ~12 s of refill, met as 429 + 3 s wait, ~3 passes, 429 + 3 s wait, …
    //
    // Why max_concurrent: 1. The mock counts in window_violations every request of the key
    // that ARRIVES inside the window, including those already in flight when the 429 was
    // sent, which no proxy can recall. With at most one request in flight, nothing else is
    // in flight when a 429 leaves the mock, so every violation is a request pacerd
    // dispatched after it had read the 429: the queued requests of the other 7 clients,
    // not only the retried one, must wait out the window (the whole lane holds).
    alone: 'light',
    name: 'd. retry-after: 3 on 429s: no request reaches the mock inside an advertised window',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 60, retry_after_s: 3, headers: false } });
      const p = await startPacerdFor(t, mock, { plans: { default: { max_concurrent: 1 } } });
      const key = 'sk-scen-d-0001';
      const N = 72;
      const run = await runLoad({
        base: p.url, n: N, concurrency: 8, deadline_ms: 28000,
        makeRequest: () => ({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: chatBody({ max_tokens: 16 }) }),
      });
      const sum = summarize(run);
      const st = await mock.stats();
      const retries = events(p, 'retry');
      console.log(`# scenario d: mock requests=${st.requests} rate_limited=${st.rate_limited} window_violations=${st.window_violations} in_flight_max=${st.in_flight_max} ` +
        `responses=${JSON.stringify(st.responses)}; client statuses=${JSON.stringify(sum.statuses)}; pacerd retry delays (s): ` +
        `${retries.map((r) => r.delay_s).join(', ')}; wall=${(run.wall_ms / 1000).toFixed(2)}s`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.ok(st.rate_limited >= 1, `the mock sent no 429: the scenario did not test the window${why}`);
      assert.ok(st.in_flight_max <= 1, `max_concurrent 1, yet the mock saw ${st.in_flight_max} requests in flight at once`);
      assert.equal(st.window_violations, 0, `${st.window_violations} request(s) reached the mock inside a 3 s retry-after window${why}`);
      for (const r of retries) assert.ok(r.delay_s >= 3 - 0.001, `retry with delay_s ${r.delay_s} < the server's retry-after 3: ${JSON.stringify(r)}`);
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of ${N} requests answered within the 28 s bound (ideal ≈ 12 s): ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
    },
  },
  {
    // f. A 429 for money (OpenAI insufficient_quota; Anthropic enforced_spend_limit_reached)
    // can never pass: it is relayed at once with x-should-retry: false, after exactly one
    // upstream call; the lane then knows the key's quota is out, and the next requests get
    // the same answer from pacerd at once (x-pacer-attempts 0), without an upstream call,
    // until the probe interval (quota_probe_s, 10 s) has passed.
    name: 'f. quota exhausted: the 429 comes back in < 100 ms with x-should-retry: false; later requests get it without an upstream call',
    timeout_ms: 15000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', quota_exhausted: true } });
      const amock = await t.startMock({ config: { style: 'anthropic', quota_exhausted: true } });
      const p = await startPacerdFor(t, mock, { providers: { anthropic: { upstream: amock.url } } });
      const lines = [];
      for (let i = 1; i <= 3; i++) {
        const r = await send(`${p.url}/v1/chat/completions`, {
          headers: { authorization: 'Bearer sk-scen-f-0001', 'content-type': 'application/json' }, body: chatBody({ max_tokens: 16 }), timeout_ms: 5000,
        });
        const ms = r.end - r.start;
        lines.push(`openai #${i}: ${r.status} in ${ms} ms, x-should-retry=${r.headers?.['x-should-retry']}, x-pacer-attempts=${r.headers?.['x-pacer-attempts']}`);
        assert.equal(r.status, 429, `openai #${i}: ${r.status} ${r.error ?? r.body}`);
        assert.equal(JSON.parse(r.body).error?.code, 'insufficient_quota', r.body);
        assert.equal(r.headers['x-should-retry'], 'false', `openai #${i}: x-should-retry ${r.headers['x-should-retry']}`);
        assert.ok(ms < 100 * SLOW, `openai #${i}: the quota 429 took ${ms} ms\n${logDigest(p)}`);
        assert.equal(r.headers['x-pacer-attempts'], i === 1 ? '1' : '0', `openai #${i}: x-pacer-attempts`);
        assert.equal((await mock.stats()).requests, 1, `openai #${i}: upstream calls`);
      }
      for (let i = 1; i <= 2; i++) {
        const r = await send(`${p.url}/anthropic/v1/messages`, {
          headers: { 'x-api-key': 'sk-ant-scen-f-0001', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'claude-mock', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }), timeout_ms: 5000,
        });
        const ms = r.end - r.start;
        lines.push(`anthropic #${i}: ${r.status} in ${ms} ms, x-should-retry=${r.headers?.['x-should-retry']}`);
        assert.equal(r.status, 429, `anthropic #${i}: ${r.status} ${r.error ?? r.body}`);
        assert.match(r.body, /enforced_spend_limit_reached/);
        assert.equal(r.headers['x-should-retry'], 'false', `anthropic #${i}: x-should-retry ${r.headers['x-should-retry']}`);
        assert.ok(ms < 100 * SLOW, `anthropic #${i}: the spend-limit 429 took ${ms} ms`);
        assert.equal((await amock.stats()).requests, 1, `anthropic #${i}: upstream calls`);
      }
      const ex = events(p, 'quota_exhausted');
      assert.equal(ex.length, 2, `one quota_exhausted line per lane: ${JSON.stringify(ex)}`);
      assert.deepEqual(ex.map((e) => e.reason).sort(), ['enforced_spend_limit_reached', 'insufficient_quota']);
      console.log(`# scenario f: ${lines.join('; ')}`);
      const rec = (await mock.requests())[0];
      assert.equal(keyHash(recHeader(rec, 'authorization').replace(/^Bearer /, '')), keyHash('sk-scen-f-0001'));
    },
  },
  {
    // DESIGN §3: a server hint that lands past the request's deadline (a daily cap, say)
    // is not waited for: the upstream's own answer is relayed now, with
    // x-should-retry: false so that the SDK behind pacerd does not wait either.
    name: 'a retry-after past retry.deadline_s: the 429 is relayed at once with x-should-retry: false',
    timeout_ms: 15000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 1, retry_after_s: 7200, headers: false } });
      const p = await startPacerdFor(t, mock, { plans: { default: { retry: { deadline_s: 60 } } } });
      const hdrs = { authorization: 'Bearer sk-daily-cap-0001', 'content-type': 'application/json' };
      const first = await send(`${p.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 5000 });
      assert.equal(first.status, 200, `first request: ${first.status} ${first.body}`);
      const r = await send(`${p.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 5000 });
      const ms = r.end - r.start;
      assert.equal(r.status, 429, `${r.status} ${r.error ?? r.body}`);
      assert.equal(r.headers['retry-after'], '7200', 'the upstream\'s own retry-after is relayed');
      assert.equal(r.headers['x-should-retry'], 'false');
      assert.equal(r.headers['x-pacer-attempts'], '1');
      assert.ok(ms < 500 * SLOW, `relayed after ${ms} ms: pacerd waited for a window past the deadline`);
      assert.equal((await mock.stats()).requests, 2, 'one upstream call for the second request');
      // A cap no request could wait out is the key's quota: the next request gets the same
      // answer from pacerd at once, without an upstream call (issue 7.4).
      const third = await send(`${p.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 5000 });
      assert.equal(third.status, 429, `${third.status} ${third.body}`);
      assert.equal(third.headers['x-pacer-attempts'], '0');
      assert.equal(third.headers['x-should-retry'], 'false');
      assert.equal(third.headers['retry-after'], '7200', 'the upstream\'s own answer, replayed');
      assert.equal((await mock.stats()).requests, 2, 'the third request reached the mock');
      assert.equal(events(p, 'quota_exhausted').length, 1);
    },
  },
  {
    // Transient errors are retried (max_attempts in all), and the client sees only the
    // final answer; a 503 that keeps coming is relayed after the last attempt.
    name: 'transient 500s are retried up to retry.max_attempts; the client sees the last answer',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { plans: { default: { retry: { max_attempts: 3, initial_delay_ms: 100, max_delay_ms: 200 } } } });
      const t0 = Date.now();
      const r = await send(`${p.url}/v1/chat/completions`, {
        headers: { 'content-type': 'application/json', 'x-mock-status': '500' }, body: chatBody(), timeout_ms: 10000,
      });
      const ms = Date.now() - t0;
      assert.equal(r.status, 500, `${r.status} ${r.body}`);
      assert.equal(r.headers['x-pacer-attempts'], '3');
      assert.equal((await mock.stats()).requests, 3, 'three upstream attempts in all');
      // Backoff: 100 ms + jitter (≤ 500 ms), then 200 ms (the max) + jitter.
      assert.ok(ms >= 250 && ms < 3000 * SLOW, `three attempts took ${ms} ms`);
      assert.equal(events(p, 'retry').length, 2, 'two retry log lines');
    },
  },
];
