// SPDX-License-Identifier: Apache-2.0
// The Responses API as Codex-style agents send it (issue 28, item 1; PROVIDERS.md §11).
// pacerd-mock answers POST /v1/responses (tests/mock/README.md "Responses API"): it
// counts the input as the provider does (instructions, every input item kind, tools,
// and the history it holds for previous_response_id), streams OpenAI's events, and its
// response.completed line repeats instructions, tools and output (x-mock-completed-bytes
// pads it further). The mock's figures are printed as `# ` lines.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { SLOW, request, waitFor } from '../lib.mjs';
import { events, logDigest, send, startPacerdWithAdmin } from '../load.mjs';

/* Item 1 of issue 28 has two halves, both asserted here: the usage read from events and
 * answers of any length (before it, a response.completed line over 64 KiB and a JSON
 * answer over 256 KiB went unread, and the gate was never corrected), and the estimate
 * of every item kind and of the history the server holds for previous_response_id
 * (before it, function_call / function_call_output / reasoning items, tools and history
 * counted nothing: with the usage read alone, many agents with long answers reached
 * 0.50 of the TPM after 1 upstream 429; with both, ~0.95 and none). */

const MODEL = 'gpt-5-codex';

/** Deterministic prose of n characters (ASCII words; no JSON escapes). */
function prose(n, seed) {
  const words = ['the', 'lane', 'charges', 'what', 'provider', 'counts', 'agent', 'reads', 'file', 'patch',
    'test', 'shell', 'command', 'output', 'budget', 'token', 'minute', 'request', 'queue', 'answer'];
  let s = '';
  let x = seed * 2654435761 % 4294967296 || 1;
  while (s.length < n) {
    x = (x * 1103515245 + 12345) % 2147483648;
    s += words[x % words.length] + (x % 11 === 0 ? '. ' : ' ');
  }
  return s.slice(0, n);
}

/* Codex-style: 80 KiB of instructions, tool schemas with long descriptions (~8 KiB). */
const INSTRUCTIONS = prose(80 * 1024, 1);
const TOOLS = ['shell', 'apply_patch', 'update_plan', 'view_image', 'read_file', 'list_dir'].map((name, i) => ({
  type: 'function',
  name,
  description: prose(1200, 10 + i),
  strict: false,
  parameters: {
    type: 'object',
    properties: { command: { type: 'array', items: { type: 'string' }, description: prose(120, 20 + i) }, workdir: { type: 'string' } },
    required: ['command'],
    additionalProperties: false,
  },
}));
const OUTPUT_CHARS = 6 * 1024; // a tool call's output (a file read, a test run)

const reasoningItem = (a, j) => ({ type: 'reasoning', id: `rs_${a}_${j}`, summary: [{ type: 'summary_text', text: prose(400, 100 * a + j) }] });
const callItem = (a, j) => ({ type: 'function_call', call_id: `call_${a}_${j}`, name: 'shell', arguments: JSON.stringify({ command: ['bash', '-lc', prose(240, 200 * a + j)], workdir: '/work' }) });
const outputItem = (a, j) => ({ type: 'function_call_output', call_id: `call_${a}_${j}`, output: prose(OUTPUT_CHARS, 300 * a + j) });

/**
 * Turn k of agent a. Every third turn (k % 3 == 0) sends the whole history inline
 * (the user's message, then each earlier turn's reasoning, function_call and its
 * output); the turns between name the previous response (previous_response_id) and
 * send only the output of the call it made: the server holds the rest.
 */
function turnBody(a, k, prevId) {
  const chained = k % 3 !== 0 && prevId != null;
  const input = [];
  if (chained) {
    input.push(outputItem(a, k - 1));
  } else {
    input.push({ role: 'user', content: [{ type: 'input_text', text: `Agent ${a}: the test in tests/unit/sched/test_cost.c fails; find why and fix it.` }] });
    for (let j = 0; j < k; j++) input.push(reasoningItem(a, j), callItem(a, j), outputItem(a, j));
  }
  const body = {
    model: MODEL, instructions: INSTRUCTIONS, input, tools: TOOLS, tool_choice: 'auto', parallel_tool_calls: false,
    reasoning: { effort: 'medium', summary: 'auto' }, store: true, stream: true, include: ['reasoning.encrypted_content'],
    prompt_cache_key: `agent-${a}`,
  };
  if (chained) body.previous_response_id = prevId;
  return body;
}

/** The events of an SSE body: [{type, data}] (data parsed). */
function sseEvents(text) {
  const out = [];
  for (const block of text.split('\n\n')) {
    const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    if (data) out.push(JSON.parse(data));
  }
  return out;
}

/** One streamed turn over plain HTTP: {status, id, usage, error}. */
async function rawTurn(base, key, agent, body, t0, headers) {
  const r = await send(`${base}/v1/responses`, {
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-agent-id': agent, ...headers },
    body: JSON.stringify(body), timeout_ms: 60000, t0,
  });
  if (r.status !== 200) return { status: r.status, start: r.start, end: r.end, error: r.error ?? (r.body ?? '').slice(0, 200) };
  const evs = sseEvents(r.body);
  const done = evs.find((e) => e.type === 'response.completed');
  return { status: 200, start: r.start, end: r.end, id: evs[0]?.response?.id, usage: done?.response?.usage };
}

/** One streamed turn through the official SDK (client.responses.create). */
async function sdkTurn(client, body, t0, headers) {
  const start = Date.now() - t0;
  try {
    const stream = await client.responses.create(body, { headers });
    let id, usage;
    for await (const e of stream) {
      if (e.type === 'response.created') id = e.response.id;
      if (e.type === 'response.completed') usage = e.response.usage;
    }
    return { status: 200, start, end: Date.now() - t0, id, usage };
  } catch (e) {
    return { status: e.status ?? 0, start, end: Date.now() - t0, error: e.message };
  }
}

/** An agent's turns in order (from turn `from` on), each after the previous answer. */
async function runAgent({ base, key, a, from = 0, turns, sdk, t0, headers = {} }) {
  const agent = `codex-${a}`;
  const client = sdk ? new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0, timeout: 60000, defaultHeaders: { 'x-agent-id': agent } }) : null;
  const out = [];
  let prev = null;
  for (let k = from; k < from + turns; k++) {
    const body = turnBody(a, k, prev);
    const r = sdk ? await sdkTurn(client, body, t0, headers) : await rawTurn(base, key, agent, body, t0, headers);
    out.push({ a, k, chained: body.previous_response_id != null, ...r });
    if (r.id) prev = r.id;
  }
  return out;
}

async function laneOf(p, model) {
  const r = await request(`${p.admin}/status`);
  return JSON.parse(r.body.toString()).lanes.find((l) => l.provider === 'openai' && l.model === model);
}

/* The provider's token budget: 3,000,000 TPM (50,000 a second), held over two seconds
 * (token_burst 100,000: OpenAI enforces per-minute limits over shorter windows, as
 * pacerd's own gate on an openai lane holds one second's worth). */
const TPM = 3000000;
const TOKEN_BURST = 100000;
const AGENTS = 3;
const TURNS = 10;

// The agents' tests pace a told TPM over 17-25 s (bounds: <= 3 upstream 429s and >= 0.8
// of the TPM, measured 0 and 0.95-0.97): beside other files under run.mjs --jobs, each
// test in a process of its own.
export const split = true;

export const tests = [
  {
    // The mock alone: its count of a Responses request, as the provider counts it.
    name: 'pacerd-mock: /v1/responses counts instructions, every input item kind, tools and the history of previous_response_id and conversation',
    fn: async (t) => {
      const mock = await t.startMock();
      const post = async (body, headers = {}) => {
        const r = await request(`${mock.url}/v1/responses`, { method: 'POST', headers: { authorization: 'Bearer sk-count', 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
        return { status: r.status, json: JSON.parse(r.body.toString()) };
      };
      // Characters / 4 of each part (all ASCII): instructions 400, tools' JSON, items.
      const tools = [{ type: 'function', name: 'shell', parameters: {} }];
      const toolsChars = JSON.stringify(tools).length;
      const items = [
        { role: 'user', content: 'a'.repeat(40) },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'b'.repeat(40) }] },
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'c'.repeat(80) }] },
        { type: 'function_call', call_id: 'c1', name: 'shell', arguments: 'd'.repeat(75) },
        { type: 'function_call_output', call_id: 'c1', output: 'e'.repeat(400) },
      ];
      const itemChars = 40 + 40 + 80 + 5 + 75 + 400;
      const first = await post({ model: MODEL, instructions: 'i'.repeat(400), input: items, tools });
      assert.equal(first.status, 200);
      const u1 = first.json.usage;
      assert.equal(u1.input_tokens, 100 + Math.floor(toolsChars / 4) + Math.floor(itemChars / 4), JSON.stringify(u1));
      assert.equal(u1.output_tokens, 5);
      assert.equal(u1.total_tokens, u1.input_tokens + 5);
      assert.equal(u1.output_tokens_details.reasoning_tokens, 0);
      // Chained: the history held is the previous input without instructions and tools,
      // plus its output; instructions and tools are sent (and counted) again.
      const held = u1.input_tokens - 100 - Math.floor(toolsChars / 4) + 5;
      const second = await post({ model: MODEL, instructions: 'i'.repeat(400), previous_response_id: first.json.id, input: [{ type: 'function_call_output', call_id: 'c2', output: 'f'.repeat(40) }], tools });
      assert.equal(second.json.usage.input_tokens, 100 + Math.floor(toolsChars / 4) + 10 + held, JSON.stringify(second.json.usage));
      assert.equal(second.json.previous_response_id, first.json.id);
      // A conversation accumulates the same way.
      const c1 = await post({ model: MODEL, conversation: 'conv_count', input: 'g'.repeat(400) });
      const c2 = await post({ model: MODEL, conversation: { id: 'conv_count' }, input: 'h'.repeat(40) });
      assert.equal(c1.json.usage.input_tokens, 100);
      assert.equal(c2.json.usage.input_tokens, 10 + 100 + 5);
      // An unknown previous response: 400, before any limit.
      const lost = await post({ model: MODEL, previous_response_id: 'resp_mock_999999', input: 'x' });
      assert.equal(lost.status, 400);
      assert.equal(lost.json.error.code, 'previous_response_not_found');
      // The tokens the budgets charged: input + 16 (no max_output_tokens) per passed request.
      const st = await mock.stats();
      const charged = [u1, second.json.usage, c1.json.usage, c2.json.usage].reduce((s, u) => s + u.input_tokens + 16, 0);
      assert.equal(st.models[MODEL].tokens, charged, JSON.stringify(st.models));
      assert.equal(st.models[MODEL].passed, 4);
    },
  },
  {
    // The mock alone: a Responses request is charged to the token budgets as counted
    // (input + max_output_tokens, or 16), and token_burst holds the tpm bucket to fewer
    // tokens than a minute's worth (refilled at tpm / 60 a second).
    name: 'pacerd-mock: /v1/responses meets the tpm budget as counted; token_burst caps its bucket; too large for the burst never passes',
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', model_limits: [{ models: [MODEL], tpm: 60000, token_burst: 1000 }] } });
      const post = (chars, max) => send(`${mock.url}/v1/responses`, {
        headers: { authorization: 'Bearer sk-burst', 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, input: [{ type: 'function_call_output', call_id: 'c', output: 'o'.repeat(chars) }], max_output_tokens: max }),
        timeout_ms: 5000,
      });
      const a = await post(2000, 100); // 500 + 100
      assert.equal(a.status, 200);
      assert.equal(a.headers['x-ratelimit-limit-tokens'], '60000');
      assert.equal(a.headers['x-ratelimit-remaining-tokens'], '400');
      const b = await post(2000, 100); // 600 more: the bucket holds ~400
      assert.equal(b.status, 429);
      assert.match(JSON.parse(b.body).error.message, /on tokens per min \(TPM\): Limit 60000, Used 5\d\d, Requested 600\./);
      const c = await post(4000, 100); // 1100 > the burst of 1000: never
      assert.equal(c.status, 429);
      assert.match(JSON.parse(c.body).error.message, /^Request too large/);
      assert.equal(c.headers['retry-after'], undefined);
      const st = await mock.stats();
      assert.deepEqual([st.models[MODEL].passed, st.models[MODEL].rate_limited, st.models[MODEL].tokens, st.tokens], [1, 2, 600, 600]);
    },
  },
  {
    // The events as OpenAI sends them, read by the official SDK, and a 200 KiB
    // response.completed (x-mock-completed-bytes) whose usage comes last.
    name: 'pacerd-mock: /v1/responses streams OpenAI\'s events (the SDK reads them); x-mock-completed-bytes pads response.completed to 200 KiB',
    fn: async (t) => {
      const mock = await t.startMock();
      const client = new OpenAI({ apiKey: 'sk-events', baseURL: `${mock.url}/v1`, maxRetries: 0 });
      const stream = await client.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'hello', tools: TOOLS, stream: true },
        { headers: { 'x-mock-chunks': '3', 'x-mock-completed-bytes': String(200 * 1024), 'x-mock-reasoning-tokens': '7' } });
      const seen = [];
      let completed;
      for await (const e of stream) {
        seen.push(e.type);
        assert.equal(e.sequence_number, seen.length - 1);
        if (e.type === 'response.completed') completed = e.response;
      }
      assert.deepEqual(seen, ['response.created', 'response.in_progress', 'response.output_item.added', 'response.output_item.done',
        'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.delta',
        'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
      assert.equal(completed.instructions, INSTRUCTIONS);
      assert.equal(completed.tools.length, TOOLS.length);
      assert.deepEqual(completed.output.map((o) => o.type), ['reasoning', 'message']);
      assert.equal(completed.output[1].content[0].text, 'tok tok tok ');
      assert.equal(completed.usage.output_tokens, 3 + 7);
      assert.equal(completed.usage.output_tokens_details.reasoning_tokens, 7);
      const raw = await request(`${mock.url}/v1/responses`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'x-mock-completed-bytes': String(200 * 1024) },
        body: JSON.stringify({ model: MODEL, instructions: INSTRUCTIONS, input: 'hello', stream: true }),
      });
      const line = raw.body.toString().split('\n').find((l) => l.startsWith('data: {"type":"response.completed"'));
      assert.equal(line.length, 200 * 1024);
      assert.ok(line.lastIndexOf('"usage":{') > 150 * 1024, 'the usage comes after the padding, near the end');
    },
  },
  {
    // Three Codex-style agents, ten turns each, streamed; pacerd told the TPM (a plan),
    // the provider sends no rate-limit headers. Bounds (issue 28): <= 3 upstream 429s in
    // the 30 calls, >= 0.8 of the TPM used: the tokens the mock charged for what passed,
    // against what its budget admits over the span of the arrivals (the burst plus the
    // refill). Agent 0 speaks through the official SDK. Measured: before the usage of
    // long lines was read, 8-10 upstream 429s at 0.92-0.98 used; since, 0 at 0.97.
    name: 'Responses agent (80 KiB instructions, tools, function_call items, previous_response_id), told the TPM, no headers: <= 3 upstream 429s in 30 calls, >= 0.8 of the TPM used',
    timeout_ms: 90000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', headers: false, latency_ms: 50, model_limits: [{ models: [MODEL], tpm: TPM, token_burst: TOKEN_BURST }] } });
      const p = await startPacerdWithAdmin(t, mock, { plans: { codex: { max_tokens_per_minute: TPM } }, providers: { openai: { plan: 'codex' } } });
      const key = 'sk-codex-agents';
      const t0 = Date.now();
      const runs = await Promise.all(Array.from({ length: AGENTS }, (_, a) => runAgent({ base: p.url, key, a, turns: TURNS, sdk: a === 0, t0 })));
      const calls = runs.flat();
      const st = await mock.stats();
      const m = st.models[MODEL] ?? {};
      const at = (await mock.requests()).filter((r) => r.uri === '/v1/responses').map((r) => r.t_mono_us / 1000).sort((x, y) => x - y);
      const span = at.length ? at[at.length - 1] - at[0] : 0;
      const allowed = TOKEN_BURST + (TPM / 60000) * span;
      const used = (m.tokens ?? 0) / allowed;
      const ok = calls.filter((c) => c.status === 200).length;
      const lane = await laneOf(p, MODEL);
      const lines = events(p, 'request').filter((l) => l.path === '/v1/responses');
      console.log(`# Responses agent, told ${TPM} TPM: ${ok} of ${calls.length} calls succeeded; upstream 429 ${m.rate_limited ?? 0}; ` +
        `TPM used ${(used * 100).toFixed(1)} % (${m.tokens} tokens over ${(span / 1000).toFixed(2)} s; the budget admits ${Math.round(allowed)}); ` +
        `chained ${calls.filter((c) => c.chained).length}; request lines with usage ${lines.filter((l) => l.tokens !== undefined).length} of ${lines.length}`);
      console.log(`#   mock input tokens per call: ${calls.map((c) => c.usage?.input_tokens ?? '-').join(' ')}; lane ${JSON.stringify(lane?.counters ?? null)}`);
      const why = `\n${calls.filter((c) => c.status !== 200).slice(0, 3).map((c) => `agent ${c.a} turn ${c.k}: ${c.status} ${c.error}`).join('\n')}\n${logDigest(p)}`;
      assert.ok((m.passed ?? 0) >= calls.length, `the mock passed ${m.passed} of ${calls.length} calls${why}`);
      assert.equal(ok, calls.length, `not every call succeeded${why}`);
      assert.ok(calls.every((c) => c.usage?.input_tokens > 20000), 'every call carried the instructions');
      assert.ok((m.rate_limited ?? 0) <= 3, `${m.rate_limited} upstream 429s in ${calls.length} calls (> 3)${why}`);
      assert.ok(used >= 0.8 / SLOW, `${(used * 100).toFixed(1)} % of the TPM used (< 80 %)${why}`);
    },
  },
  {
    // Fifteen agents at once, each mid-session (turn 6 sends its six earlier calls
    // inline, turn 7 names turn 6's response and sends one output), answers streaming for
    // ~5 s as a model's do. pacerd's estimate must be right when the request leaves: the
    // usage corrects the gate only at the answer's end, and by then a dozen requests are
    // in flight. Same bounds as above. Measured: the same token volume as chat
    // completions (estimated right): 0 upstream 429s, 0.95 used; main: 1 upstream 429 and
    // 0.50 used (the 429 cuts the lane's concurrency, and with 5 s answers it comes back
    // slowly); before the usage of long lines was read, 3 and 0.35.
    name: 'Responses agents, many and mid-session, answers of 5 s, told the TPM, no headers: <= 3 upstream 429s in 30 calls, >= 0.8 of the TPM used',
    timeout_ms: 120000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', headers: false, latency_ms: 50, model_limits: [{ models: [MODEL], tpm: TPM, token_burst: TOKEN_BURST }] } });
      const p = await startPacerdWithAdmin(t, mock, { plans: { codex: { max_tokens_per_minute: TPM } }, providers: { openai: { plan: 'codex' } } });
      const key = 'sk-codex-many';
      const t0 = Date.now();
      const headers = { 'x-mock-chunks': '50', 'x-mock-chunk-ms': '100' };
      const runs = await Promise.all(Array.from({ length: 15 }, (_, a) => runAgent({ base: p.url, key, a, from: 6, turns: 2, sdk: a === 0, t0, headers })));
      const calls = runs.flat();
      const st = await mock.stats();
      const m = st.models[MODEL] ?? {};
      const at = (await mock.requests()).filter((r) => r.uri === '/v1/responses').map((r) => r.t_mono_us / 1000).sort((x, y) => x - y);
      const span = at.length ? at[at.length - 1] - at[0] : 0;
      const allowed = TOKEN_BURST + (TPM / 60000) * span;
      const used = (m.tokens ?? 0) / allowed;
      const ok = calls.filter((c) => c.status === 200).length;
      const lane = await laneOf(p, MODEL);
      console.log(`# Responses agents, many, answers of 5 s, told ${TPM} TPM: ${ok} of ${calls.length} calls succeeded in ${((Date.now() - t0) / 1000).toFixed(1)} s; upstream 429 ${m.rate_limited ?? 0}; ` +
        `TPM used ${(used * 100).toFixed(1)} % (${m.tokens} tokens over ${(span / 1000).toFixed(2)} s; the budget admits ${Math.round(allowed)}); concurrency limit ${lane?.concurrency_limit}`);
      const why = `\n${calls.filter((c) => c.status !== 200).slice(0, 3).map((c) => `agent ${c.a} turn ${c.k}: ${c.status} ${c.error}`).join('\n')}\n${logDigest(p)}`;
      assert.equal(ok, calls.length, `not every call succeeded${why}`);
      assert.ok(calls.every((c) => c.usage?.input_tokens > 30000), 'every call carried its history');
      assert.ok((m.rate_limited ?? 0) <= 3, `${m.rate_limited} upstream 429s in ${calls.length} calls (> 3)${why}`);
      assert.ok(used >= 0.8 / SLOW, `${(used * 100).toFixed(1)} % of the TPM used (< 80 %)${why}`);
    },
  },
  {
    // A 200 KiB response.completed (its usage last), streamed through a metered lane (a
    // token gate): the request's log line carries the usage the mock reported, as a chat
    // completion's does (stream_usage.mjs). And whole answers of 200 and 320 KiB.
    // Before the usage of long lines was read, the streamed one and the 320 KiB one had none.
    name: '200 KiB response.completed: the usage at its end is read (streamed, and whole answers of 200 and 320 KiB), the client gets every byte',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { plans: { codex: { max_tokens_per_minute: 100000000 } }, providers: { openai: { plan: 'codex' } } });
      const body = (stream) => JSON.stringify({ model: MODEL, instructions: INSTRUCTIONS, input: [outputItem(9, 0)], tools: TOOLS, stream });
      const headers = { authorization: 'Bearer sk-codex-completed', 'content-type': 'application/json', 'x-mock-completed-bytes': String(200 * 1024) };
      // The second request with the same instructions and tools reports them cached:
      // the first one warms the mock's cache, so that the two compared agree.
      await send(`${mock.url}/v1/responses`, { headers, body: body(false), timeout_ms: 10000 });
      const via = await send(`${p.url}/v1/responses`, { headers, body: body(true), timeout_ms: 10000 });
      const direct = await send(`${mock.url}/v1/responses`, { headers, body: body(true), timeout_ms: 10000 });
      assert.equal(via.status, 200, via.body?.slice(0, 300));
      const norm = (s) => s.replace(/resp_mock_\d+|msg_mock_\d+|rs_mock_\d+/g, 'ID');
      assert.equal(norm(via.body), norm(direct.body), 'the client gets the stream as the upstream sent it');
      const completed = sseEvents(via.body).find((e) => e.type === 'response.completed');
      const line = via.body.split('\n').find((l) => l.startsWith('data: {"type":"response.completed"'));
      assert.equal(line.length, 200 * 1024);
      // Whole answers: 200 KiB (within the meter's JSON cap, read on main too) and
      // 320 KiB (over it: main relays it unread).
      const wholeOf = async (bytes) => {
        const r = await send(`${p.url}/v1/responses`, { headers: { ...headers, 'x-mock-completed-bytes': String(bytes) }, body: body(false), timeout_ms: 10000 });
        assert.equal(r.status, 200);
        assert.equal(r.body.length, bytes);
        return JSON.parse(r.body).usage;
      };
      const w200 = await wholeOf(200 * 1024), w320 = await wholeOf(320 * 1024);
      const usage = completed.response.usage;
      await waitFor(() => events(p, 'request').filter((l) => l.path === '/v1/responses').length >= 3, { what: 'three request lines' });
      const [streamed, plain, large] = events(p, 'request').filter((l) => l.path === '/v1/responses');
      console.log(`# 200 KiB response.completed: usage ${JSON.stringify(usage)}; request lines' tokens: streamed ${streamed.tokens}, ` +
        `whole 200 KiB ${plain.tokens}, whole 320 KiB ${large.tokens}`);
      const sum = (u) => u.input_tokens + u.output_tokens;
      assert.equal(plain.tokens, sum(w200), `the 200 KiB answer's log line: ${JSON.stringify(plain)}`);
      assert.equal(streamed.tokens, sum(usage), `the streamed request's log line: ${JSON.stringify(streamed)}`);
      assert.equal(large.tokens, sum(w320), `the 320 KiB answer's log line: ${JSON.stringify(large)}`);
    },
  },
];

