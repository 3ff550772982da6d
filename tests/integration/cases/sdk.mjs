// SPDX-License-Identifier: Apache-2.0
// The official SDKs, pointed at pacerd exactly as users do (baseURL), with no
// retries of their own so that every failure shows.
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { SLOW, freePort, keyHash, recHeader, request, tryConnect, waitFor } from '../lib.mjs';
import { startPacerdFor } from '../load.mjs';

const openai = (p, apiKey = 'sk-test-openai-sdk-0001') =>
  new OpenAI({ apiKey, baseURL: `${p.url}/v1`, maxRetries: 0, timeout: 10000 * SLOW });
const anthropic = (p, apiKey = 'sk-ant-test-sdk-0001') =>
  new Anthropic({ apiKey, baseURL: `${p.url}/anthropic`, maxRetries: 0, timeout: 10000 * SLOW });

// @anthropic-ai/sdk 0.x sent `x-api-key`; 1.x sends `Authorization: Bearer <apiKey>`.
const anthropicKeyOf = (rec) => recHeader(rec, 'x-api-key') ?? recHeader(rec, 'authorization')?.replace(/^Bearer /, '');

/** A pacerd of the test's own with an admin port, openai and anthropic upstream at a mock of its own (issue 18). */
async function pacerdWithStatus(t) {
  const mock = await t.startMock();
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, { admin: { listen: `127.0.0.1:${aport}` }, providers: { anthropic: { upstream: mock.url } } });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  const lanes = async (provider, key) => JSON.parse((await request(`http://127.0.0.1:${aport}/status`)).body.toString())
    .lanes.filter((l) => l.provider === provider && l.key === keyHash(key));
  return { mock, p, lanes };
}
const laneModels = (ls) => ls.map((l) => JSON.stringify({ model: l.model, scope_kind: l.scope_kind, dispatched: l.counters?.dispatched })).join(' ');

export const tests = [
  {
    name: 'openai: chat.completions.create returns content and usage',
    fn: async (t) => {
      const p = await t.pacerd();
      const { data, response } = await openai(p).chat.completions
        .create({ model: 'gpt-mock', messages: [{ role: 'user', content: 'Say hello to the test suite' }] })
        .withResponse();
      assert.equal(data.object, 'chat.completion');
      assert.equal(data.model, 'gpt-mock');
      assert.equal(data.choices[0].message.content, 'tok tok tok tok tok ');
      assert.equal(data.choices[0].finish_reason, 'stop');
      assert.deepEqual(data.usage, { prompt_tokens: 6, completion_tokens: 5, total_tokens: 11 });
      assert.equal(response.headers.get('x-pacer-attempts'), '1');
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.method, 'POST');
      assert.equal(rec.uri, '/v1/chat/completions');
      assert.equal(recHeader(rec, 'authorization'), 'Bearer sk-test-openai-sdk-0001');
    },
  },
  {
    name: 'openai: streamed chat completion, every chunk by async iteration, with usage',
    fn: async (t) => {
      const p = await t.pacerd();
      const stream = await openai(p).chat.completions.create({
        model: 'gpt-mock', stream: true, stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'stream to me' }],
      });
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
      assert.equal(text, 'tok tok tok tok tok ');
      assert.equal(chunks.at(-1).choices.length, 0);
      assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
      assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason === 'stop').length, 1);
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.uri, '/v1/chat/completions');
      assert.equal(recHeader(rec, 'authorization'), 'Bearer sk-test-openai-sdk-0001');
      assert.equal((await t.mock.stats()).streams_completed, 1);
    },
  },
  {
    name: 'openai: embeddings.create and models.list',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = openai(p, 'sk-test-openai-sdk-emb');
      const e = await c.embeddings.create({ model: 'text-embedding-mock', input: ['one', 'two', 'three'], encoding_format: 'float' });
      assert.equal(e.data.length, 3);
      assert.deepEqual(e.data[2].embedding, [0.125, -0.25, 0.375, -0.5, 0.625, -0.75, 0.875, -1.0]);
      assert.equal(e.data[2].index, 2);
      const ids = [];
      for await (const m of c.models.list()) ids.push(m.id);
      assert.deepEqual(ids, ['gpt-mock', 'gpt-4o-mini', 'claude-mock']);
      const rs = await t.mock.requests();
      assert.deepEqual(rs.map((r) => `${r.method} ${r.uri}`), ['POST /v1/embeddings', 'GET /v1/models']);
      for (const r of rs) assert.equal(recHeader(r, 'authorization'), 'Bearer sk-test-openai-sdk-emb');
    },
  },
  {
    name: 'openai: an upstream 400 surfaces as the SDK\'s BadRequestError with the upstream message',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = openai(p);
      await assert.rejects(
        c.chat.completions.create({ model: 'gpt-mock', messages: [{ role: 'user', content: 'x' }] },
          { headers: { 'x-mock-status': '400', 'x-mock-error-code': 'invalid_value', 'x-mock-error-message': 'bad model' } }),
        (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.code === 'invalid_value' && /bad model/.test(e.message),
      );
    },
  },
  {
    name: 'anthropic: messages.create through /anthropic',
    fn: async (t) => {
      const p = await t.pacerd();
      const m = await anthropic(p).messages.create({
        model: 'claude-mock', max_tokens: 3, messages: [{ role: 'user', content: 'Hello, Claude mock!' }],
      });
      assert.equal(m.type, 'message');
      assert.equal(m.model, 'claude-mock');
      assert.equal(m.content[0].text, 'tok tok tok ');
      assert.equal(m.stop_reason, 'max_tokens');
      assert.deepEqual(m.usage, { input_tokens: 4, output_tokens: 3 });
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.uri, '/v1/messages');
      assert.equal(anthropicKeyOf(rec), 'sk-ant-test-sdk-0001');
      assert.ok(recHeader(rec, 'anthropic-version'), 'anthropic-version forwarded');
    },
  },
  {
    name: 'anthropic: messages.stream collects the text and the final usage',
    fn: async (t) => {
      const p = await t.pacerd();
      const stream = anthropic(p, 'sk-ant-test-sdk-stream').messages.stream({
        model: 'claude-mock', max_tokens: 100, messages: [{ role: 'user', content: 'Stream, please' }],
      });
      const deltas = [];
      stream.on('text', (d) => deltas.push(d));
      const final = await stream.finalMessage();
      assert.equal(deltas.length, 5);
      assert.equal(deltas.join(''), 'tok tok tok tok tok ');
      assert.equal(final.content[0].text, 'tok tok tok tok tok ');
      assert.equal(final.usage.output_tokens, 5);
      assert.equal(final.usage.input_tokens, 3);
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.uri, '/v1/messages');
      assert.equal(anthropicKeyOf(rec), 'sk-ant-test-sdk-stream');
      assert.equal((await t.mock.stats()).streams_completed, 1);
    },
  },
  {
    name: 'anthropic: the key the SDK sends names the lane (pacerd logs its hash prefix, not "anonymous")',
    fn: async (t) => {
      const p = await t.pacerd();
      const key = 'sk-ant-test-sdk-lane-7f3a';
      const before = p.logs().length;
      await anthropic(p, key).messages.create({ model: 'claude-mock', max_tokens: 2, messages: [{ role: 'user', content: 'lane?' }] });
      const rec = await t.mock.onlyRequest();
      const sent = recHeader(rec, 'x-api-key') ? 'x-api-key' : 'authorization: Bearer';
      const line = await waitFor(() => p.logs().slice(before).find((l) => l.event === 'request' && l.provider === 'anthropic'),
        { timeout_ms: 2000 * SLOW, what: 'the request log line' });
      assert.equal(line.key, keyHash(key), `the SDK sends the key as ${sent}; pacerd's anthropic provider logged key "${line.key}"`);
    },
  },
  {
    // Issue 18: a lane per (provider, scope, model group). Two models through the SDK:
    // both answer, and /status shows the key's two lanes, one per model.
    name: 'openai: two models through the SDK, two lanes in /status (model gpt-4o and gpt-4o-mini)',
    fn: async (t) => {
      const { p, lanes } = await pacerdWithStatus(t);
      const key = 'sk-test-openai-sdk-models';
      const c = openai(p, key);
      for (const model of ['gpt-4o', 'gpt-4o-mini', 'gpt-4o']) {
        const r = await c.chat.completions.create({ model, messages: [{ role: 'user', content: `hello ${model}` }] });
        assert.equal(r.model, model);
        assert.equal(r.choices[0].message.content, 'tok tok tok tok tok ');
      }
      const ls = await lanes('openai', key);
      console.log(`# openai SDK, two models: lanes ${laneModels(ls)}`);
      assert.deepEqual(ls.map((l) => l.model).sort(), ['gpt-4o', 'gpt-4o-mini'], `lanes: ${laneModels(ls)}`);
      assert.deepEqual(Object.fromEntries(ls.map((l) => [l.model, l.counters.dispatched])), { 'gpt-4o': 2, 'gpt-4o-mini': 1 });
      for (const l of ls) assert.equal(l.scope_kind, 'key');
    },
  },
  {
    // Anthropic's built-in model classes: claude-sonnet-4-5 and claude-3-5-haiku-20241022
    // are two groups (two lanes); claude-sonnet-4 and claude-sonnet-4-5 are one class,
    // the lane "claude-sonnet-4".
    name: 'anthropic: two model classes through the SDK, two lanes; claude-sonnet-4 and claude-sonnet-4-5 share the lane "claude-sonnet-4"',
    fn: async (t) => {
      const { p, lanes } = await pacerdWithStatus(t);
      const key = 'sk-ant-test-sdk-models';
      const c = anthropic(p, key);
      const warn = console.warn;
      console.warn = () => {}; // the SDK's model deprecation notices
      try {
        for (const model of ['claude-sonnet-4-5', 'claude-3-5-haiku-20241022', 'claude-sonnet-4']) {
          const m = await c.messages.create({ model, max_tokens: 3, messages: [{ role: 'user', content: `hello ${model}` }] });
          assert.equal(m.model, model);
          assert.equal(m.content[0].text, 'tok tok tok ');
        }
      } finally {
        console.warn = warn;
      }
      const ls = await lanes('anthropic', key);
      console.log(`# anthropic SDK, two classes: lanes ${laneModels(ls)}`);
      assert.deepEqual(ls.map((l) => l.model).sort(), ['claude-3-5-haiku', 'claude-sonnet-4'], `lanes: ${laneModels(ls)}`);
      assert.deepEqual(Object.fromEntries(ls.map((l) => [l.model, l.counters.dispatched])), { 'claude-sonnet-4': 2, 'claude-3-5-haiku': 1 });
    },
  },
];
