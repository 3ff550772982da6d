// SPDX-License-Identifier: Apache-2.0
// One taxonomy of refusals, per provider, from the body (issue 28, item 4;
// docs/pacing.md "Whose refusal"). pacerd-mock answers each shape
// (tests/mock/README.md): OpenRouter's two 402s (payment_402), Gemini's 429 bodies
// with QuotaFailure and RetryInfo (style gemini, on /v1beta/models/NAME:generateContent),
// Anthropic's 529 overloaded_error (the capacity schedule), and an OpenAI flex 429
// resource_unavailable (per request: x-mock-status and x-mock-error-code).
//
// Every test has a mock and a pacerd of its own; the figures are the mock's counts,
// printed as `# ` lines.
import assert from 'node:assert/strict';
import { SLOW, request } from '../lib.mjs';
import { logDigest, runLoad, startPacerdWithAdmin, summarize } from '../load.mjs';

/** A pacerd of this test with an admin port, `over` merged into the suite's configuration. */
const pacerdWithAdmin = startPacerdWithAdmin;

async function lanesOf(p, provider) {
  const r = await request(`${p.admin}/status`);
  assert.equal(r.status, 200);
  return JSON.parse(r.body.toString()).lanes.filter((l) => l.provider === provider);
}

const chat = (prefix, key, model, extra = {}, headers = {}) => () => ({
  path: `${prefix}/v1/chat/completions`,
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
  body: JSON.stringify({ model, max_tokens: 16, messages: [{ role: 'user', content: 'Say hello to the refusals test.' }], ...extra }),
});

const gemini = (key, model) => () => ({
  path: `/gemini/v1beta/models/${model}:generateContent`,
  headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
  body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Say hello to the refusals test.' }] }] }),
});

/** The span in seconds of the mock's recorded arrivals that `pick` keeps. */
async function arrivalSpan(mock, pick = () => true) {
  const at = (await mock.requests()).filter(pick).map((r) => r.t_mono_us / 1000).sort((a, b) => a - b);
  return at.length ? (at[at.length - 1] - at[0]) / 1000 : 0;
}

const passed = (s) => s?.passed ?? 0;
const refused = (s) => s?.rate_limited ?? 0;

export const tests = [
  {
    // OpenRouter's transient 402: at most 10 requests of the key in flight (the mock's
    // in-flight budget, 300 ms each); over it, 402 in_flight_budget_exhausted with
    // Retry-After: 2. 40 clients at once: pacerd holds the lane for the Retry-After and
    // retries, so every call succeeds and the client never sees a 402.
    name: 'OpenRouter 402 in_flight_budget_exhausted (Retry-After: 2): all 40 calls succeed after the wait',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', headers: false, concurrency: 10, payment_402: 'in_flight', latency_ms: 300 } });
      const p = await pacerdWithAdmin(t, mock, { providers: { openrouter: { upstream: mock.url } } });
      const run = await runLoad({ base: p.url, n: 40, concurrency: 40, makeRequest: chat('/openrouter', 'sk-or-inflight-1', 'openai/gpt-4o'), deadline_ms: 30000 });
      const sum = summarize(run);
      const st = await mock.stats();
      console.log(`# openrouter transient 402: client ${JSON.stringify(sum.statuses)}; mock responses ${JSON.stringify(st.responses)}; wall ${(run.wall_ms / 1000).toFixed(2)} s`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p, ['retry', 'quota_exhausted'])}`;
      assert.ok((st.responses['402'] ?? 0) >= 1, `the mock sent no 402: the case did not happen${why}`);
      assert.equal(sum.statuses['200'] ?? 0, 40, `not every call succeeded: ${JSON.stringify(sum.statuses)}${why}`);
    },
  },
  {
    // OpenRouter's final 402 (credits exhausted): one answer per request, never retried
    // (x-should-retry: false, at most one attempt), and the lane's quota is out: the
    // requests after the first answer get it from pacerd without an upstream call.
    name: 'OpenRouter 402 credits: one answer per request, never retried, lane in quota',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', headers: false, payment_402: 'credits', latency_ms: 50 } });
      const p = await pacerdWithAdmin(t, mock, { providers: { openrouter: { upstream: mock.url } } });
      const run = await runLoad({ base: p.url, n: 20, concurrency: 4, makeRequest: chat('/openrouter', 'sk-or-credits-1', 'openai/gpt-4o'), deadline_ms: 10000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const lanes = await lanesOf(p, 'openrouter');
      const attempts = run.results.map((r) => Number(r.headers?.['x-pacer-attempts']));
      console.log(`# openrouter credits 402: client ${JSON.stringify(sum.statuses)}; mock requests ${st.requests}; attempts ${JSON.stringify(attempts)}; lanes ${lanes.map((l) => l.state).join(',')}`);
      assert.equal(sum.statuses['402'] ?? 0, 20, `every call gets the 402: ${JSON.stringify(sum.statuses)}`);
      for (const r of run.results) assert.equal(r.headers?.['x-should-retry'], 'false', `x-should-retry: false on every 402`);
      assert.ok(attempts.every((a) => a <= 1), `a 402 for credits was retried: attempts ${JSON.stringify(attempts)}`);
      assert.ok(st.requests <= 4, `${st.requests} upstream calls: the lane did not stop at the first answer (at most the 4 in flight)`);
      assert.ok(lanes.some((l) => l.state === 'quota_exhausted'), `/status: ${JSON.stringify(lanes.map((l) => l.state))}`);
    },
  },
  {
    // Gemini native, two models (0.5 and 10 requests per second: 30 and 600 per minute,
    // buckets of 3 and 10), no rate-limit headers, told nothing. A refusal's body says
    // which budget (quotaId: requests per minute), its limit (quotaValue) and the wait
    // (retryDelay): pacerd learns the budget from the first refusal and paces below it.
    // Bounds: <= 3 refusals per model, >= 0.8 of each model's limit (what its bucket
    // could admit over the span of the arrivals), nothing sent inside a retryDelay (the
    // mock's window_violations, with 5 ms of grace for a request already on the wire).
    // Light (10 requests a second): beside other light timing tests only.
    alone: 'light',
    name: 'Gemini, two models, told nothing: <= 3 refusals per model, >= 0.8 of each limit, nothing inside a retryDelay',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({
        config: { style: 'gemini', window_grace_ms: 5, model_limits: [{ models: ['gemini-a'], rpm: 30, burst: 3 }, { models: ['gemini-b'], rpm: 600, burst: 10 }] },
      });
      const p = await pacerdWithAdmin(t, mock, { providers: { gemini: { upstream: mock.url } } });
      const key = 'AIza-gemini-two-models';
      const [ra, rb] = await Promise.all([
        runLoad({ base: p.url, n: 200, concurrency: 4, makeRequest: gemini(key, 'gemini-a'), deadline_ms: 12000 }),
        runLoad({ base: p.url, n: 2000, concurrency: 8, makeRequest: gemini(key, 'gemini-b'), deadline_ms: 12000 }),
      ]);
      const st = await mock.stats();
      const a = st.models['gemini-a'], b = st.models['gemini-b'];
      const spanA = await arrivalSpan(mock, (r) => r.uri.includes('gemini-a'));
      const spanB = await arrivalSpan(mock, (r) => r.uri.includes('gemini-b'));
      const usedA = passed(a) / (3 + 0.5 * spanA), usedB = passed(b) / (10 + 10 * spanB);
      const lanes = await lanesOf(p, 'gemini');
      console.log(`# gemini two models: gemini-a ${passed(a)} passed (${(usedA * 100).toFixed(1)} % of 3 + 0.5/s × ${spanA.toFixed(2)} s), ${refused(a)} refusals; ` +
        `gemini-b ${passed(b)} passed (${(usedB * 100).toFixed(1)} % of 10 + 10/s × ${spanB.toFixed(2)} s), ${refused(b)} refusals; window_violations ${st.window_violations}`);
      console.log(`#   client statuses: a ${JSON.stringify(summarize(ra).statuses)} b ${JSON.stringify(summarize(rb).statuses)}; learned ${lanes.map((l) => `${l.model}: ${JSON.stringify(l.learned?.requests ?? null)}`).join(' ')}`);
      const why = `\n${logDigest(p)}`;
      assert.ok(refused(a) >= 1 && refused(b) >= 1, `no refusal: the case did not happen${why}`);
      assert.ok(refused(a) <= 3, `gemini-a met ${refused(a)} refusals (> 3)${why}`);
      assert.ok(refused(b) <= 3, `gemini-b met ${refused(b)} refusals (> 3)${why}`);
      assert.ok(usedA >= 0.8 / SLOW, `gemini-a used ${(usedA * 100).toFixed(1)} % of its limit (< 80 %)${why}`);
      assert.ok(usedB >= 0.8 / SLOW, `gemini-b used ${(usedB * 100).toFixed(1)} % of its limit (< 80 %)${why}`);
      assert.equal(st.window_violations, 0, `${st.window_violations} request(s) sent inside a retryDelay${why}`);
    },
  },
  {
    // Anthropic 529 overloaded_error: Anthropic-wide capacity, not the account's
    // budget. The mock's headers teach the lane a 1200 RPM budget (a bucket of 20,
    // answers in 100 ms); the capacity schedule answers 529 for 0.6 s of every 2 s. Every call succeeds (held, retried),
    // and the lane is not cut: no capacity reaction (AIMD), its concurrency limit and its
    // learned pace unchanged by the storm.
    // Light (4 clients, 100 ms answers): beside other light timing tests only.
    alone: 'light',
    name: 'Anthropic 529 storm: requests held and retried, the learned rate and concurrency not cut',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({
        config: { style: 'anthropic', rpm: 1200, burst: 20, latency_ms: 100, capacity: [{ rps: 1000, ms: 1400 }, { rps: 0, ms: 600 }], overload_status: [529] },
      });
      const p = await pacerdWithAdmin(t, mock, { providers: { anthropic: { upstream: mock.url } } });
      const key = 'sk-ant-overloaded-1';
      const msg = () => ({
        path: '/anthropic/v1/messages',
        headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'Say hello to the overload test.' }] }),
      });
      // A warm-up that drains the bucket, so that the headers teach a pace.
      const warm = await runLoad({ base: p.url, n: 40, concurrency: 10, makeRequest: msg, deadline_ms: 10000 });
      assert.equal(summarize(warm).statuses['200'], 40, `warm-up: ${JSON.stringify(summarize(warm).statuses)}`);
      const before = (await lanesOf(p, 'anthropic'))[0];
      const run = await runLoad({ base: p.url, n: 80, concurrency: 4, makeRequest: msg, deadline_ms: 25000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const after = (await lanesOf(p, 'anthropic'))[0];
      const pace = (l) => l?.learned?.requests?.pace_per_min ?? 0;
      console.log(`# anthropic 529 storm: client ${JSON.stringify(sum.statuses)}; mock responses ${JSON.stringify(st.responses)}; ` +
        `concurrency ${before.concurrency_limit} -> ${after.concurrency_limit}; pace/min ${pace(before).toFixed(1)} -> ${pace(after).toFixed(1)}; ` +
        `capacity signals ${after.counters.capacity_signals}, reactions ${after.counters.capacity_reactions}; wall ${(run.wall_ms / 1000).toFixed(2)} s`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.ok((st.responses['529'] ?? 0) >= 1, `the mock sent no 529: the case did not happen${why}`);
      assert.equal(sum.statuses['200'] ?? 0, 80, `not every call succeeded: ${JSON.stringify(sum.statuses)}${why}`);
      // The learned pace is cut only by a capacity reaction (sched.c: the same
      // reaction that cuts AIMD), so none may happen. The pace itself moves with the
      // headers' fit (±15 % between runs), so it is only checked against a collapse
      // (main before this work: 4746 -> 619/min, concurrency 64 -> 2), when the
      // warm-up taught one (its shape is not always known after 40 requests).
      assert.ok(after.counters.capacity_signals >= 1, `no 529 reached the lane${why}`);
      assert.equal(after.counters.capacity_reactions, 0, `a 529 cut the lane (capacity_reactions)${why}`);
      assert.ok(after.concurrency_limit >= before.concurrency_limit, `the concurrency limit fell: ${before.concurrency_limit} -> ${after.concurrency_limit}${why}`);
      if (pace(before) > 0) assert.ok(pace(after) >= 0.5 * pace(before), `the learned pace fell: ${pace(before)} -> ${pace(after)}${why}`);
    },
  },
  {
    // OpenAI flex: requests with service_tier "flex" meet 429 resource_unavailable (the
    // flex tier is short; retry-after: 1) while standard-tier requests of the same key
    // and model pass. The standard tier's throughput during the shortage must stay
    // within 0.8 of what it is without it (the mock answers in 50 ms; 8 clients each).
    // Alone: it measures throughput with no limit, as fast as the cores allow.
    alone: true,
    name: 'OpenAI flex 429 resource_unavailable does not slow standard-tier requests of the same model',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600000, latency_ms: 50 } });
      const p = await pacerdWithAdmin(t, mock);
      const key = 'sk-flex-tier-1';
      const standard = chat('', key, 'o3');
      const flex = chat('', key, 'o3', { service_tier: 'flex' }, {
        'x-mock-status': '429', 'x-mock-error-code': 'resource_unavailable', 'x-mock-error-type': 'invalid_request_error',
        'x-mock-error-message': 'Resource unavailable. Please try again later.', 'x-mock-header': 'retry-after: 1', 'x-pacer-timeout-ms': '2500',
      });
      const alone = await runLoad({ base: p.url, n: 100000, concurrency: 8, makeRequest: standard, deadline_ms: 3000 });
      const sa = summarize(alone);
      const [during, f] = await Promise.all([
        runLoad({ base: p.url, n: 100000, concurrency: 8, makeRequest: standard, deadline_ms: 3000 }),
        runLoad({ base: p.url, n: 100000, concurrency: 8, makeRequest: flex, deadline_ms: 3000 }),
      ]);
      const sd = summarize(during), sf = summarize(f);
      const lanes = await lanesOf(p, 'openai');
      const rate = (s, run) => (s.statuses['200'] ?? 0) / (run.wall_ms / 1000);
      const ratio = rate(sd, during) / rate(sa, alone);
      console.log(`# flex shortage: standard alone ${rate(sa, alone).toFixed(1)}/s, during the shortage ${rate(sd, during).toFixed(1)}/s (${(ratio * 100).toFixed(1)} %); ` +
        `flex client ${JSON.stringify(sf.statuses)}; lanes ${lanes.map((l) => `conc ${l.concurrency_limit} reactions ${l.counters.capacity_reactions}`).join(' ')}`);
      const why = `\n${logDigest(p)}`;
      assert.ok((sf.statuses['429'] ?? 0) >= 1, `no flex refusal reached the client: the case did not happen ${JSON.stringify(sf.statuses)}`);
      assert.ok(ratio >= 0.8 / SLOW, `standard-tier throughput fell to ${(ratio * 100).toFixed(1)} % during the flex shortage${why}`);
    },
  },
];
