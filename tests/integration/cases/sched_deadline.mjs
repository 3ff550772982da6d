// SPDX-License-Identifier: Apache-2.0
// The client's own deadline (issue 8.2): X-Stainless-Timeout (seconds, sent by the
// official SDKs on every request) or x-pacer-timeout-ms. A request whose queue ETA is
// past its deadline is answered at once, 503 deadline_unreachable with retry-after,
// instead of waiting for nothing; the official SDK gets pacerd's answer, never its own
// timeout. Each test has a mock and a pacerd of its own.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { SLOW, recHeader } from '../lib.mjs';
import { chatBody, events, keyEntry, send, sleep, startPacerdFor } from '../load.mjs';

/** A lane paced at 1 req/s with 10 requests queued in it: an ETA of ~9-10 s. */
async function saturated(t, key) {
  const mock = await t.startMock();
  const p = await startPacerdFor(t, mock, { plans: { slow: { max_requests_per_second: 1 } }, keys: [keyEntry(key, 'slow')] });
  const stop = new AbortController();
  const fillers = Array.from({ length: 10 }, () => send(`${p.url}/v1/chat/completions`, {
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: chatBody(), timeout_ms: 20000, signal: stop.signal,
  }));
  t.defer(async () => { stop.abort(); await Promise.all(fillers); });
  await sleep(200); // all ten are in the lane
  return { mock, p };
}

export const tests = [
  {
    name: 'X-Stainless-Timeout: 2 behind a 10-s queue: 503 deadline_unreachable in <= 50 ms with retry-after; a longer timeout waits',
    timeout_ms: 20000,
    fn: async (t) => {
      const key = 'sk-deadline-0001';
      const { mock, p } = await saturated(t, key);
      const hdrs = (extra) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json', ...extra });
      const r = await send(`${p.url}/v1/chat/completions`, { headers: hdrs({ 'x-stainless-timeout': '2', 'x-test-mark': 'short' }), body: chatBody(), timeout_ms: 5000 });
      const ms = r.end - r.start;
      console.log(`#   deadline: ${r.status} in ${ms} ms, retry-after=${r.headers?.['retry-after']} retry-after-ms=${r.headers?.['retry-after-ms']} ${r.body}`);
      assert.equal(r.status, 503, `${r.status} ${r.error ?? r.body}`);
      assert.equal(JSON.parse(r.body).error?.code, 'deadline_unreachable', r.body);
      assert.ok(ms <= 50 * SLOW, `answered after ${ms} ms`);
      const ra = Number(r.headers['retry-after']);
      assert.ok(ra >= 5 && ra <= 11, `retry-after ${r.headers['retry-after']}: the ETA of ~9-10 s`);
      // x-pacer-timeout-ms, in ms, does the same (and is not forwarded).
      const r2 = await send(`${p.url}/v1/chat/completions`, { headers: hdrs({ 'x-pacer-timeout-ms': '1500', 'x-test-mark': 'short' }), body: chatBody(), timeout_ms: 5000 });
      assert.equal(r2.status, 503, `${r2.status} ${r2.body}`);
      assert.equal(JSON.parse(r2.body).error?.code, 'deadline_unreachable');
      // A timeout longer than the ETA waits in the queue like any request.
      const stop = new AbortController();
      const long = send(`${p.url}/v1/chat/completions`, { headers: hdrs({ 'x-stainless-timeout': '600', 'x-test-mark': 'long' }), body: chatBody(), timeout_ms: 20000, signal: stop.signal });
      await sleep(500);
      stop.abort();
      const lr = await long;
      assert.equal(lr.status, 0, `a request with 600 s to spare was answered ${lr.status} ${lr.body}`);
      const recs = await mock.requests();
      assert.equal(recs.filter((x) => recHeader(x, 'x-test-mark') === 'short').length, 0, 'a refused request reached the mock');
      assert.ok(recs.every((x) => recHeader(x, 'x-pacer-timeout-ms') === undefined), 'x-pacer-timeout-ms was forwarded');
      assert.equal(events(p, 'rejected').filter((l) => l.eta_ms !== undefined).length, 2, 'two rejected lines with eta_ms');
    },
  },
  {
    name: 'the official openai SDK with timeout: 2000 through a saturated lane gets pacerd\'s 503, never its own timeout',
    timeout_ms: 20000,
    fn: async (t) => {
      const key = 'sk-deadline-sdk-0001';
      const { p } = await saturated(t, key);
      // openai-node 7.x sends X-Stainless-Timeout when the request sets its own timeout
      // (the client's default of 10 min is not sent).
      const client = new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 });
      const t0 = Date.now();
      let err = null;
      try {
        await client.chat.completions.create({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }] }, { timeout: 2000 });
      } catch (e) {
        err = e;
      }
      const ms = Date.now() - t0;
      console.log(`#   deadline (sdk): ${err?.constructor?.name} status=${err?.status} code=${err?.code ?? err?.error?.code} after ${ms} ms`);
      assert.ok(err !== null, 'the request succeeded through a 10-s queue within 2 s');
      assert.equal(err.status, 503, `the SDK saw ${err.constructor.name}: ${err.message}`);
      assert.equal(err.error?.code ?? err.code, 'deadline_unreachable');
      assert.ok(ms < 1000 * SLOW, `the SDK waited ${ms} ms for pacerd's answer`);
    },
  },
  {
    // A retry whose delay lands past the request's own deadline is not waited for: the
    // upstream's answer (503 with retry-after: 5) is relayed at once, after one attempt,
    // with x-should-retry: false (it is the server's hint that does not fit in 2 s).
    name: 'a retry-after past X-Stainless-Timeout: the upstream answer is relayed at once with x-should-retry: false',
    timeout_ms: 15000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock);
      const hdrs = { authorization: 'Bearer sk-deadline-retry-0001', 'content-type': 'application/json', 'x-mock-status': '503', 'x-mock-header': 'retry-after: 5' };
      const r = await send(`${p.url}/v1/chat/completions`, { headers: { ...hdrs, 'x-stainless-timeout': '2' }, body: chatBody(), timeout_ms: 8000 });
      const ms = r.end - r.start;
      assert.equal(r.status, 503, `${r.status} ${r.body}`);
      assert.equal(r.headers['x-should-retry'], 'false');
      assert.equal(r.headers['x-pacer-attempts'], '1');
      assert.ok(ms < 1000 * SLOW, `relayed after ${ms} ms`);
      // Without a client deadline the same answer is retried after 5 s (the default
      // retry.deadline_s is 300 s): the contrast that makes the first one count.
      const stop = new AbortController();
      const r2 = send(`${p.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 8000, signal: stop.signal });
      await sleep(1500);
      stop.abort();
      assert.equal((await r2).status, 0, 'without a deadline the 503 with retry-after: 5 was relayed at once');
    },
  },
];
