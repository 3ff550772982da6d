// SPDX-License-Identifier: Apache-2.0
// pacerd-mock's engine mode by itself (no pacerd; issue 29): a server that batches
// continuously, as vLLM does, and overloads by queueing and preempting, never by
// refusing. Each test starts a mock of its own (tests/integration/lib/engine.mjs).
import assert from 'node:assert/strict';
import http from 'node:http';
import { request, streamRequest, waitFor } from '../lib.mjs';
import {
  ENGINE_DEFAULTS, chatStreamBody, closedLoop, configureEngine, engineRequests, engineStats,
  startEngine, stepMs, unloadedTtftMs,
} from '../lib/engine.mjs';

const chat = (mock, { headers = {}, ...body } = {}) => request(`${mock.url}/v1/chat/completions`, {
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: chatStreamBody({ stream: false, ...body }),
});

// Streams one request alone; ms of the head, the first content chunk and the end.
async function streamAlone(mock, headers = {}, body = {}) {
  let first = null;
  const r = await streamRequest(`${mock.url}/v1/chat/completions`, {
    headers: { 'content-type': 'application/json', ...headers },
    body: chatStreamBody(body),
    onChunk: (c, ms) => { if (first === null && c.toString().includes('"content":"tok')) first = ms; },
  });
  const head = performance.now();
  const text = (await r.done).toString();
  return { r, text, first, headMs: head, end: performance.now() };
}

export const tests = [
  {
    name: 'alone: the 200 at once, the first token after one prefill step, then one token a step; usage and finish_reason',
    alone: true,
    fn: async (t) => {
      const mock = await startEngine(t);
      const t0 = performance.now();
      const { r, text, first, headMs, end } = await streamAlone(mock, { 'x-mock-output-tokens': '10' },
        { max_tokens: 100, stream: true });
      const chunks = text.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)));
      assert.equal(r.status, 200);
      assert.equal(r.headers['content-type'], 'text/event-stream');
      assert.ok(!Object.keys(r.headers).some((h) => h.includes('ratelimit')), JSON.stringify(r.headers));
      assert.ok(headMs - t0 < 40, `the status line came ${headMs - t0} ms after the request, before the prefill`);
      assert.equal(chunks.filter((c) => c.choices[0]?.delta?.content === 'tok ').length, 10);
      assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
      // the engine's own clock: arrival to first token is one step of 1,024 prefill tokens
      const [rec] = await engineRequests(mock);
      const ttft = rec.first_token_ms - rec.arrival_ms;
      const unloaded = unloadedTtftMs();
      assert.ok(Math.abs(unloaded - 65.39) < 0.01, `the defaults' prefill step: ${unloaded}`);
      assert.ok(ttft >= unloaded - 0.5 && ttft <= unloaded + 25, `upstream first token ${ttft} ms, model ${unloaded}`);
      assert.equal(rec.prompt_tokens, 1024);
      assert.equal(rec.output_tokens, 10);
      assert.equal(rec.state, 'finished');
      // nine decode steps of one sequence after the first token (the steps keep their
      // schedule: a first token late by the mock's scheduling makes this span shorter)
      const decode = rec.end_ms - rec.first_token_ms;
      assert.ok(decode >= 9 * stepMs({}, 0, 1) - 20 && decode <= 9 * stepMs({}, 0, 1) + 40, `9 decode steps took ${decode} ms`);
      t.note(`upstream first token ${ttft.toFixed(1)} ms (model ${unloaded.toFixed(1)}); client: head ${(headMs - t0).toFixed(1)} ms, ` +
        `first token ${first.toFixed(1)} ms, end ${(end - t0).toFixed(1)} ms`);
      // not streamed: the whole answer at its last token; max_tokens cuts the output
      const n = await chat(mock, { max_tokens: 3, headers: { 'x-mock-output-tokens': '7' } });
      assert.equal(n.status, 200);
      assert.equal(n.json().usage.completion_tokens, 3);
      assert.equal(n.json().usage.prompt_tokens, 1024);
      assert.equal(n.json().choices[0].finish_reason, 'length');
      assert.equal(n.json().choices[0].message.content, 'tok tok tok ');
      // twice slower steps, set while running: the unloaded first token doubles
      await configureEngine(mock, { step_scale: 2 });
      await streamAlone(mock, { 'x-mock-output-tokens': '1' });
      const recs = await engineRequests(mock);
      const slow = recs.at(-1).first_token_ms - recs.at(-1).arrival_ms;
      assert.ok(slow >= 2 * unloaded - 0.5 && slow <= 2 * unloaded + 25, `2x slower steps: first token ${slow} ms`);
      const st = await engineStats(mock);
      assert.equal(st.finished, 3);
      assert.equal(st.output_tokens, 10 + 3 + 1);
      assert.equal(st.config.step_scale, 2);
    },
  },
  {
    name: 'output lengths drawn from the configured range, the same for a seed; a request too large for the cache is a 400',
    fn: async (t) => {
      const mock = await startEngine(t, { output_tokens_min: 2, output_tokens_max: 6, kv_tokens: 2048 });
      const lengths = async () => {
        const out = [];
        for (let i = 0; i < 8; i++) out.push((await chat(mock, { prompt_tokens: 8 })).json().usage.completion_tokens);
        return out;
      };
      await mock.reset(); // restarts the draws of the seed
      const a = await lengths();
      await mock.reset();
      const b = await lengths();
      assert.deepEqual(a, b);
      assert.ok(a.every((n) => n >= 2 && n <= 6), JSON.stringify(a));
      assert.ok(new Set(a).size > 1, JSON.stringify(a));
      const big = await chat(mock, { prompt_tokens: 2048 });
      assert.equal(big.status, 400);
      assert.equal(big.json().error.type, 'invalid_request_error');
      const bad = await request(`${mock.url}/_mock/engine`, { method: 'POST', body: '{"kv_tokenz": 5}' });
      assert.equal(bad.status, 400);
      assert.match(bad.json().error, /unknown field kv_tokenz/);
      const range = await request(`${mock.url}/_mock/engine`, { method: 'POST', body: '{"step_scale": 0}' });
      assert.equal(range.status, 400);
      assert.equal((await engineStats(mock)).config.step_scale, 1);
    },
  },
  {
    name: 'a client that leaves, streamed or not: its sequence is taken out of the engine and its blocks freed',
    fn: async (t) => {
      const mock = await startEngine(t);
      const long = { 'content-type': 'application/json', 'x-mock-output-tokens': '20000' }; // 1,314 blocks of the 2,088
      const s = await streamRequest(`${mock.url}/v1/chat/completions`, { headers: long, body: chatStreamBody() });
      await waitFor(async () => (await engineStats(mock)).output_tokens >= 3, { timeout_ms: 5000, what: 'three tokens' });
      // not streamed: nothing is written before the last token, so only its socket shows it left
      const body = chatStreamBody({ stream: false });
      const n = http.request(`${mock.url}/v1/chat/completions`, { method: 'POST', agent: false, headers: { ...long, 'content-length': Buffer.byteLength(body) } });
      let answered = false;
      n.on('response', () => { answered = true; });
      n.on('error', () => {});
      n.end(body);
      await waitFor(async () => (await engineStats(mock)).running === 2, { timeout_ms: 5000, what: 'both running' });
      s.req.destroy();
      await waitFor(async () => (await engineStats(mock)).running === 1, { timeout_ms: 5000, what: 'the stream taken out' });
      assert.equal((await engineStats(mock)).aborted, 1);
      assert.equal((await mock.stats()).streams_aborted, 1);
      await waitFor(async () => (await engineRequests(mock)).some((r) => r.state === 'running' && r.output_tokens > 2), { timeout_ms: 5000, what: 'tokens of the second' });
      assert.equal(answered, false, 'no answer before its last token');
      n.destroy();
      await waitFor(async () => (await engineStats(mock)).running === 0, { timeout_ms: 5000, what: 'the second taken out' });
      const st = await engineStats(mock);
      assert.equal(st.aborted, 2);
      assert.equal(st.kv_blocks_used, 0);
      assert.equal((await mock.stats()).in_flight, 0);
      const recs = await engineRequests(mock);
      assert.deepEqual(recs.map((r) => r.state), ['aborted', 'aborted']);
      assert.ok(recs.every((r) => r.first_token_ms !== null && r.end_ms > r.first_token_ms));
    },
  },
  {
    name: 'more sequences than the KV cache holds: admitted while their prompts fit, the newest preempted and recomputed, all answered in full',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await startEngine(t);
      // 48 prompts of 64 blocks: 32 fit the 2,088 blocks; after 32 tokens each, the
      // 32 running need 32 more blocks and 8 are free
      const rs = await Promise.all(Array.from({ length: 48 }, () => streamAlone(mock, { 'x-mock-output-tokens': '64' })));
      assert.deepEqual(rs.map((x) => x.r.status), Array(48).fill(200));
      for (const x of rs) assert.equal(x.text.split('"content":"tok').length - 1, 64);
      const st = await engineStats(mock);
      assert.equal(st.finished, 48);
      assert.equal(st.output_tokens, 48 * 64);
      assert.ok(st.preemptions > 0, `preemptions ${st.preemptions}`);
      assert.ok(st.preempted_requests > 0 && st.preempted_requests <= st.preemptions);
      assert.equal(st.kv_blocks_used, 0);
      const recs = await engineRequests(mock);
      assert.equal(recs.filter((r) => r.preemptions > 0).length, st.preempted_requests);
      // a preempted request recomputes its prompt and its output so far
      assert.ok(st.prefill_tokens > 48 * 1024, `prefill tokens ${st.prefill_tokens}`);
      // the first 32 got their first token in the first step(s); the others waited
      const ttfts = recs.map((r) => r.first_token_ms - r.arrival_ms).sort((x, y) => x - y);
      assert.ok(ttfts[47] > 5 * ttfts[0], JSON.stringify(ttfts));
      t.note(`${st.preemptions} preemptions of ${st.preempted_requests} requests, ${st.prefill_tokens} prefill tokens`);
    },
  },
  {
    name: 'halving the KV cache mid-run: the batch shrinks, the queue inside the server grows',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await startEngine(t);
      const load = closedLoop({ url: mock.url, clients: 32 });
      t.defer(() => load.stop());
      const mean = async (ms) => {
        const a = await engineStats(mock);
        await new Promise((r) => setTimeout(r, ms));
        const b = await engineStats(mock);
        const span = b.t_ms - a.t_ms;
        return { waiting: (b.waiting_area_ms - a.waiting_area_ms) / span, running: (b.running_area_ms - a.running_area_ms) / span };
      };
      await new Promise((r) => setTimeout(r, 3000));
      const full = await mean(5000);
      await configureEngine(mock, { kv_tokens: ENGINE_DEFAULTS.kv_tokens / 2 });
      await new Promise((r) => setTimeout(r, 3000));
      const half = await mean(5000);
      await load.stop();
      await waitFor(async () => (await engineStats(mock)).running === 0, { timeout_ms: 10000, what: 'the engine to empty' });
      const st = await engineStats(mock);
      assert.equal(st.kv_blocks, ENGINE_DEFAULTS.kv_tokens / 2 / 16);
      // 32 in the engine: about 30 fit the full cache, about 15 the half
      assert.ok(full.running > 25 && full.waiting < 6, JSON.stringify(full));
      assert.ok(half.running < 18 && half.waiting > full.waiting + 8, JSON.stringify({ full, half }));
      assert.ok(st.preemptions > 0);
      assert.ok(st.aborted >= 28 && st.aborted <= 32, `aborted ${st.aborted}: the streams open when the clients stopped were taken out`);
      assert.equal(st.kv_blocks_used, 0);
      t.note(`32 clients: full cache ${full.running.toFixed(1)} running, ${full.waiting.toFixed(1)} waiting; ` +
        `half ${half.running.toFixed(1)} running, ${half.waiting.toFixed(1)} waiting`);
    },
  },
];
