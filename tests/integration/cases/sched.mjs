// SPDX-License-Identifier: Apache-2.0
// Smoke tests of the scheduler seen from outside: pacing at the upstream, 429s
// absorbed by retries, queue time reported. (The decisions themselves are unit-tested.)
import assert from 'node:assert/strict';
import { SLOW, VALGRIND, request } from '../lib.mjs';

const chat = (i) => JSON.stringify({ model: 'gpt-mock', max_tokens: 5, messages: [{ role: 'user', content: `request ${i}` }] });
const post = (p, i, key) => request(`${p.url}/v1/chat/completions`, {
  method: 'POST', body: chat(i), headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, timeout_ms: 20000,
});

export const tests = [
  {
    name: 'plan max_requests_per_second: 10 — six simultaneous requests of one key reach the upstream ~100 ms apart',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: { max_requests_per_second: 10 } } } });
      const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => post(p, i, 'sk-test-paced-0001')));
      for (const r of rs) assert.equal(r.status, 200);
      const arrivals = (await t.mock.requests()).map((x) => x.t_ms).sort((a, b) => a - b);
      assert.equal(arrivals.length, 6);
      const gaps = arrivals.slice(1).map((v, i) => v - arrivals[i]);
      t.note(`arrival gaps at the mock: ${gaps.join(', ')} ms`);
      const span = arrivals[5] - arrivals[0];
      assert.ok(span >= 400, `6 requests at 10/s spread over ${span} ms (expected ~500)`);
      // Under valgrind a stalled loop turn can shorten the next gap; the span still holds.
      if (!VALGRIND) assert.ok(gaps.every((g) => g >= 60), `gaps ${gaps.join(', ')} ms: requests not evenly spaced`);
      const queued = rs.map((r) => Number(r.headers['x-pacer-queue-ms'])).sort((a, b) => a - b);
      assert.ok(queued[5] >= 300, `x-pacer-queue-ms of the last request ${queued[5]} (expected ~500)`);
      // Another key is a lane of its own: not held behind the first key's queue.
      const other = await post(p, 99, 'sk-test-paced-0002');
      assert.equal(other.status, 200);
      assert.ok(Number(other.headers['x-pacer-queue-ms']) < 100 * SLOW, `another key waited ${other.headers['x-pacer-queue-ms']} ms`);
    },
  },
  {
    name: 'upstream 429s (capacity 5 rps, retry-after 1) are retried inside pacerd: the client sees only 200s',
    timeout_ms: 30000,
    fn: async (t) => {
      const m = await t.startMock({ config: { capacity: [{ rps: 5, ms: 600000 }], overload_status: [429], retry_after_s: 1 } });
      const p = await t.startPacerd({ config: { providers: { openai: { upstream: m.url } } } });
      const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => post(p, i, 'sk-test-429-0001')));
      const statuses = rs.map((r) => r.status);
      assert.deepEqual(statuses, Array(10).fill(200), `client statuses ${statuses.join(',')}`);
      const attempts = rs.map((r) => Number(r.headers['x-pacer-attempts']));
      t.note(`x-pacer-attempts: ${attempts.join(',')}`);
      const st = await m.stats();
      assert.equal(st.responses['200'], 10);
      assert.ok((st.responses['429'] ?? 0) >= 1, `the mock never answered 429: ${JSON.stringify(st.responses)}`);
      assert.equal(attempts.reduce((a, b) => a + b, 0), st.requests, 'x-pacer-attempts add up to what the upstream received');
    },
  },
];
