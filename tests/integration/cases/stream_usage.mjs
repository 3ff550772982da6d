// SPDX-License-Identifier: Apache-2.0
// Streams metered without the client asking (issue 8.3): on a lane with a token gate,
// an OpenAI chat completion streamed without stream_options.include_usage gets it on
// the way up, and the client gets back exactly the stream it asked for.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { keyHash, recHeader, request, streamRequest, waitFor } from '../lib.mjs';
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
  {
    // Issue 28 item 1: the usage is read however long the event or the answer that carries
    // it. A Responses API stream ends with response.completed, which repeats the
    // instructions, tools and output before its usage: often 100 KiB to 1 MiB on one data:
    // line. Before, a line over 64 KiB was skipped whole and a JSON answer over 256 KiB was
    // not read: these request lines had no tokens, and the token gate was never corrected.
    // The mock pads the event that carries the final usage (x-mock-usage-pad).
    name: 'the usage of a 200 KiB or 2 MiB last event, and of a 320 KiB JSON answer, is read',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const claude = 'sk-ant-metered-0001';
      const p = await startPacerdFor(t, mock, {
        providers: { anthropic: { upstream: mock.url } },
        plans: { metered: { max_tokens_per_minute: 1000000 } },
        keys: [keyEntry(metered, 'metered'), { provider: 'anthropic', key_sha256: keyHash(claude), plan: 'metered' }],
      });
      const content = 'Say hello to the stream test.'; // 29 characters: 7 prompt tokens
      const chat = (extra = {}) => JSON.stringify({ model: 'gpt-mock', stream: true, max_tokens: 16, messages: [{ role: 'user', content }], ...extra });
      const openai = { authorization: `Bearer ${metered}`, 'content-type': 'application/json', 'x-mock-chunks': '4' };
      const cases = [
        // the client asks for the usage: its reader gets the line in pieces, nothing is stripped
        { what: 'a 200 KiB usage chunk the client asked for', path: '/v1/chat/completions', pad: 200 * 1024, body: chat({ stream_options: { include_usage: true } }), headers: openai, usageSeen: true },
        // pacerd asks: the filter keeps the event whole (its cap is 1 MiB) and strips it
        { what: 'a 200 KiB usage chunk pacerd asked for', path: '/v1/chat/completions', pad: 200 * 1024, body: chat(), headers: openai, usageSeen: false },
        // over the filter's cap: it passes the rest on as it is; the usage is read all the same
        { what: 'a 2 MiB usage chunk pacerd asked for', path: '/v1/chat/completions', pad: 2 * 1024 * 1024, body: chat(), headers: openai, usageSeen: true },
        // Anthropic: message_start says 7 in, the last message_delta (200 KiB) 4 out
        {
          what: 'a 200 KiB message_delta', path: '/anthropic/v1/messages', pad: 200 * 1024,
          body: JSON.stringify({ model: 'claude-mock', stream: true, max_tokens: 16, messages: [{ role: 'user', content }] }),
          headers: { 'x-api-key': claude, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', 'x-mock-chunks': '4' },
          usageSeen: true,
        },
      ];
      let n = 0;
      for (const c of cases) {
        const r = await streamRequest(`${p.url}${c.path}`, { body: c.body, headers: { ...c.headers, 'x-mock-usage-pad': String(c.pad) }, timeout_ms: 10000 });
        assert.equal(r.status, 200, c.what);
        const text = (await r.done).toString('latin1');
        // the long event reaches the client, but where pacerd asked for it and the filter took it
        assert.equal(text.length > c.pad, c.usageSeen, `${c.what}: ${text.length} bytes reached the client`);
        assert.equal(text.includes('"usage":{'), c.usageSeen, `${c.what}: the usage chunk reached the client: ${!c.usageSeen}`);
        n++;
        await waitFor(() => events(p, 'request').length >= n, { what: `the request line of ${c.what}` });
        const line = events(p, 'request')[n - 1];
        assert.equal(line.tokens, 11, `${c.what}: the request line ${JSON.stringify(line).slice(0, 300)}`);
      }
      // a non-stream answer of 5 chunks of 64 KiB: 7 prompt + 5 completion tokens
      const r = await request(`${p.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'gpt-mock', max_tokens: 16, messages: [{ role: 'user', content }] }),
        headers: { ...openai, 'x-mock-chunks': '5', 'x-mock-chunk-bytes': '65536' },
      });
      assert.equal(r.status, 200);
      assert.ok(r.body.length > 320 * 1024, `the answer is ${r.body.length} bytes`);
      assert.equal(JSON.parse(r.body.toString()).usage.total_tokens, 12);
      await waitFor(() => events(p, 'request').length >= n + 1, { what: 'the request line of the JSON answer' });
      const line = events(p, 'request')[n];
      assert.equal(line.tokens, 12, `a 320 KiB JSON answer: the request line ${JSON.stringify(line).slice(0, 300)}`);
      console.log(`#   stream_usage: usage read from 200 KiB and 2 MiB last events and a ${r.body.length}-byte JSON answer`);
    },
  },
];
