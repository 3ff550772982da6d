// SPDX-License-Identifier: Apache-2.0
// The log: one JSON object per line; API keys never written, only their hash prefix.
import assert from 'node:assert/strict';
import { SLOW, keyHash, request, waitFor } from '../lib.mjs';

export const tests = [
  {
    name: 'API keys are never logged (debug level); the request line names the key by its 12-hex SHA-256 prefix',
    fn: async (t) => {
      // A pacerd of this test only, so that its whole log is this test's.
      const p = await t.startPacerd({ config: { plans: { default: { retry: { max_attempts: 1 } } } } });
      const bearer = `sk-test-NEVERLOG-${Date.now().toString(16)}a1`;
      const anth = `sk-ant-NEVERLOG-${Date.now().toString(16)}b2`;
      const inQuery = `sk-query-NEVERLOG-${Date.now().toString(16)}c3`;
      const r1 = await request(`${p.url}/v1/chat/completions`, {
        method: 'POST', body: JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }] }),
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      });
      assert.equal(r1.status, 200);
      const r2 = await request(`${p.url}/anthropic/v1/messages`, {
        method: 'POST', body: JSON.stringify({ model: 'claude-mock', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }),
        headers: { 'x-api-key': anth, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      });
      assert.equal(r2.status, 200);
      // A failing request (upstream error) and a key in the query string.
      const r3 = await request(`${p.url}/v1/models?key=${inQuery}`, { headers: { authorization: `Bearer ${bearer}`, 'x-mock-status': '500' } });
      assert.equal(r3.status, 500);
      const lines = await waitFor(() => {
        const l = p.logs().filter((x) => x.event === 'request');
        return l.length >= 3 ? l : null;
      }, { timeout_ms: 2000 * SLOW, what: 'three request log lines' });
      await p.stop();
      const log = p.stderr();
      for (const k of [bearer, anth, inQuery, 'NEVERLOG']) assert.ok(!log.includes(k), `the log contains the key ${k}`);
      const keys = lines.map((l) => l.key);
      assert.ok(keys.includes(keyHash(bearer)), `no request line with key ${keyHash(bearer)}: ${JSON.stringify(keys)}`);
      assert.ok(keys.includes(keyHash(anth)), `no request line with key ${keyHash(anth)}: ${JSON.stringify(keys)}`);
      for (const l of lines) {
        for (const f of ['ts', 'request_id', 'provider', 'key', 'status']) assert.ok(l[f] !== undefined, `request line without ${f}: ${JSON.stringify(l)}`);
      }
      assert.deepEqual(lines.map((l) => l.status).sort(), [200, 200, 500]);
    },
  },
  {
    name: 'every line pacerd writes to stderr is one JSON object with ts and event',
    fn: async (t) => {
      const p = await t.startPacerd();
      await request(`${p.url}/v1/models`);
      await request(`${p.url}/nope`);
      await p.stop();
      const raw = p.stderr().split('\n').filter((l) => l.length > 0 && !/^==\d+==/.test(l)); // valgrind's lines aside
      assert.ok(raw.length >= 3, `only ${raw.length} log lines`);
      for (const l of raw) {
        let j;
        assert.doesNotThrow(() => { j = JSON.parse(l); }, `not JSON: ${l}`);
        assert.equal(typeof j.ts, 'string', l);
        assert.equal(typeof j.event, 'string', l);
      }
    },
  },
];
