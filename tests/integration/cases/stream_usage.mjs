// Streams metered without the client asking (issue 8.3): on a lane with a token gate,
// an OpenAI chat completion streamed without stream_options.include_usage gets it on
// the way up, and the client gets back exactly the stream it asked for.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { keyHash, recHeader, streamRequest, waitFor } from '../lib.mjs';
import { events, keyEntry, startPacerdFor } from '../load.mjs';

const metered = 'sk-metered-0001'; // its plan has a token gate
const plain = 'sk-unmetered-0001'; // no gate: nothing is added
const added = ',"stream_options":{"include_usage":true}'.length;

async function start(t) {
  const mock = await t.startMock();
  const p = await startPacerdFor(t, mock, {
    plans: { metered: { max_tokens_per_minute: 1000000 }, off: { max_tokens_per_minute: 1000000, stream_usage: 'off' } },
    keys: [keyEntry(metered, 'metered'), keyEntry('sk-metered-off-0001', 'off')],
  });
  return { mock, p };
}

async function raw(p, key) {
  const body = JSON.stringify({ model: 'gpt-mock', stream: true, max_tokens: 16, messages: [{ role: 'user', content: 'Say hello to the stream test.' }] });
  const r = await streamRequest(`${p.url}/v1/chat/completions`, { body, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-mock-chunks': '4' }, timeout_ms: 5000 });
  assert.equal(r.status, 200);
  return (await r.done).toString('latin1');
}

export const tests = [
  {
    name: 'the client receives the same bytes with and without injection; the token gate is corrected from the injected usage',
    fn: async (t) => {
      const { mock, p } = await start(t);
      const a = await raw(p, metered);
      const b = await raw(p, plain);
      const c = await raw(p, 'sk-metered-off-0001');
      console.log(`#   stream_usage: ${a.length} bytes with injection, ${b.length} without; identical=${a === b}`);
      assert.equal(a, b, 'the metered stream differs from the one the client asked for');
      assert.equal(c, b);
      assert.ok(!a.includes('"usage"'), 'a usage field reached the client');
      const recs = await mock.requests();
      const len = (key) => recs.find((r) => recHeader(r, 'authorization') === `Bearer ${key}`).body_len;
      assert.equal(len(metered), len(plain) + added, 'include_usage was added to the metered request only');
      assert.equal(len('sk-metered-off-0001'), len(plain), 'stream_usage: off adds nothing');
      // The mock's usage: 29 characters / 4 = 7 prompt tokens + 4 completion tokens.
      await waitFor(() => events(p, 'request').length >= 3, { what: 'three request lines' });
      const reqs = events(p, 'request');
      assert.equal(reqs[0].tokens, 11, `the metered request's log line: ${JSON.stringify(reqs[0])}`);
      assert.equal(reqs[1].tokens, undefined, `an unmetered stream knows no usage: ${JSON.stringify(reqs[1])}`);
    },
  },
  {
    name: 'the official openai SDK iterating a metered stream sees the chunks it asked for, none with usage',
    fn: async (t) => {
      const { p } = await start(t);
      const chunks = async (key) => {
        const client = new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 });
        const stream = await client.chat.completions.create({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'hi' }] });
        const out = [];
        for await (const c of stream) out.push(c);
        return out;
      };
      const m = await chunks(metered);
      const u = await chunks(plain);
      console.log(`#   stream_usage (sdk): ${m.length} chunks metered, ${u.length} unmetered`);
      assert.equal(m.length, u.length);
      assert.deepEqual(m, u);
      assert.ok(m.every((c) => c.usage === undefined && c.choices.length === 1), 'an extra or usage-bearing chunk reached the SDK');
    },
  },
  {
    // Issue 19: metering keys on the API a request speaks, not on the rate-limit header
    // dialect. An OpenAI-compatible provider that sends no rate-limit headers
    // (dialect: none, as many do) still streams chat completions the OpenAI way: its
    // token-paced lane asks for the usage and learns what the stream cost. Before, only
    // providers of dialect openai were metered: the same stream went up unchanged and
    // the request line had no tokens.
    name: 'a chat completion stream on an OpenAI-compatible provider with dialect: none is metered like OpenAI\'s',
    fn: async (t) => {
      const mock = await t.startMock();
      const key = 'sk-compat-metered-0001';
      const p = await startPacerdFor(t, mock, {
        providers: { compat: { upstream: mock.url, prefix: '/compat', dialect: 'none' } },
        plans: { metered: { max_tokens_per_minute: 1000000 } },
        keys: [{ provider: 'compat', key_sha256: keyHash(key), plan: 'metered' }],
      });
      const body = JSON.stringify({ model: 'gpt-mock', stream: true, max_tokens: 16, messages: [{ role: 'user', content: 'Say hello to the stream test.' }] });
      const r = await streamRequest(`${p.url}/compat/v1/chat/completions`, { body, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-mock-chunks': '4' }, timeout_ms: 5000 });
      assert.equal(r.status, 200);
      const text = (await r.done).toString('latin1');
      assert.ok(!text.includes('"usage"'), 'a usage field reached the client');
      const rec = (await mock.requests()).find((x) => recHeader(x, 'authorization') === `Bearer ${key}`);
      assert.equal(rec.uri, '/v1/chat/completions');
      assert.equal(rec.body_len, Buffer.byteLength(body) + added, 'include_usage was not added on the dialect: none provider');
      await waitFor(() => events(p, 'request').length >= 1, { what: 'the request line' });
      const line = events(p, 'request')[0];
      assert.equal(line.tokens, 11, `the request line: ${JSON.stringify(line)}`);
    },
  },
];
