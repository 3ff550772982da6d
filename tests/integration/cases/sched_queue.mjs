// SPDX-License-Identifier: Apache-2.0
// Queue limits and queued clients that leave: i. queue_full and queue_timeout (DESIGN §6),
// j. 200 clients that disconnect while queued never reach the upstream.
// Each test has a mock of its own and a pacerd of its own.
import assert from 'node:assert/strict';
import http from 'node:http';
import { SLOW, assertPacerError, waitFor } from '../lib.mjs';
import { chatBody, send, sleep, startPacerdFor } from '../load.mjs';

const asResponse = (r) => ({ status: r.status, headers: r.headers ?? {}, text: () => r.body ?? `(no response: ${r.error})` });

const chatTo = (p, key, extra = {}, timeout_ms = 10000) => send(`${p.url}/v1/chat/completions`, {
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...extra },
  body: chatBody({ max_tokens: 16 }), timeout_ms,
});

export const tests = [
  {
    // max_concurrent 1 and a queue of 2: one request in flight (the mock holds it 1.5 s),
    // two queued, the fourth is refused at once with 503 queue_full + retry-after(-ms).
    name: 'i. queue_full: 503, pacer_error JSON, retry-after (s) and retry-after-ms ≤ 60 s, nothing sent upstream',
    timeout_ms: 15000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { plans: { default: { max_concurrent: 1, queue: { max_depth: 2 } } } });
      const key = 'sk-scen-i-full';
      const r1 = chatTo(p, key, { 'x-mock-delay-ms': '1500' });
      await waitFor(async () => (await mock.stats()).in_flight === 1, { timeout_ms: 2000 * SLOW, what: 'the first request in flight at the mock' });
      const r2 = chatTo(p, key);
      const r3 = chatTo(p, key);
      await sleep(150); // both queued
      const r4 = await chatTo(p, key);
      const ms = r4.end - r4.start;
      console.log(`# scenario i (queue_full): ${r4.status} in ${ms} ms, retry-after=${r4.headers?.['retry-after']} retry-after-ms=${r4.headers?.['retry-after-ms']} ` +
        `x-request-id=${r4.headers?.['x-request-id']} body=${r4.body?.trim()}`);
      assertPacerError(asResponse(r4), 503, 'queue_full');
      assert.ok(ms < 200 * SLOW, `queue_full took ${ms} ms (expected at once)`);
      const ra = r4.headers['retry-after'];
      const ram = r4.headers['retry-after-ms'];
      assert.match(ra ?? '', /^\d+$/, `retry-after '${ra}' (delay-seconds)`);
      assert.match(ram ?? '', /^\d+(\.\d+)?$/, `retry-after-ms '${ram}'`);
      assert.ok(Number(ra) >= 1 && Number(ra) <= 60, `retry-after ${ra} s not in [1, 60]`);
      assert.ok(Number(ram) > 0 && Number(ram) <= 60000, `retry-after-ms ${ram} not in (0, 60000]`);
      assert.ok(Math.abs(Number(ra) * 1000 - Number(ram)) < 1000, `retry-after ${ra} s and retry-after-ms ${ram} disagree`);
      assert.ok(r4.headers['x-request-id'], 'x-request-id on pacerd\'s own answer');
      const rest = await Promise.all([r1, r2, r3]);
      assert.deepEqual(rest.map((r) => r.status), [200, 200, 200], `in flight and queued: ${rest.map((r) => `${r.status} ${r.error ?? ''}`)}`);
      assert.equal((await mock.stats()).requests, 3, 'the refused request never reached the mock');
    },
  },
  {
    // max_concurrent 1 and max_wait_s 1: the mock holds the first request 3 s; the second
    // waits in the queue and is answered 504 queue_timeout after ~1 s, never sent upstream.
    name: 'i. queue_timeout: 504 pacer_error JSON after max_wait_s (1 s), nothing sent upstream',
    timeout_ms: 15000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { plans: { default: { max_concurrent: 1, queue: { max_wait_s: 1 } } } });
      const key = 'sk-scen-i-wait';
      const r1 = chatTo(p, key, { 'x-mock-delay-ms': '3000' });
      await waitFor(async () => (await mock.stats()).in_flight === 1, { timeout_ms: 2000 * SLOW, what: 'the first request in flight at the mock' });
      const r2 = await chatTo(p, key);
      const ms = r2.end - r2.start;
      console.log(`# scenario i (queue_timeout): ${r2.status} in ${ms} ms, x-pacer-queue-ms=${r2.headers?.['x-pacer-queue-ms']} x-request-id=${r2.headers?.['x-request-id']} body=${r2.body?.trim()}`);
      assertPacerError(asResponse(r2), 504, 'queue_timeout');
      assert.ok(ms >= 950 && ms <= 2500 * SLOW, `queue_timeout after ${ms} ms (max_wait_s 1)`);
      assert.ok(r2.headers['x-request-id'], 'x-request-id on pacerd\'s own answer');
      assert.equal((await r1).status, 200);
      assert.equal((await mock.stats()).requests, 1, 'the timed-out request never reached the mock');
    },
  },
  {
    // j. 1 rps plan: of 200 requests sent at once, one leaves at t=0 and one at t=1 s; when
    // the second has reached the mock, all 200 clients close their connections. No further
    // request may reach the mock (the next dispatch would be ~0.7 s after the aborts), and
    // pacerd must serve a new request promptly afterwards: its queue is empty, not 198
    // ghosts deep (which would take 198 s at 1 rps).
    name: 'j. 200 clients disconnect while queued: none reaches the mock, pacerd serves at once afterwards',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { plans: { default: { max_requests_per_second: 1 } } });
      const key = 'sk-scen-j-0001';
      const body = chatBody({ max_tokens: 16 });
      const reqs = [];
      let answered = 0;
      for (let i = 0; i < 200; i++) {
        const req = http.request(`${p.url}/v1/chat/completions`, {
          method: 'POST', agent: false,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        }, (res) => { answered++; res.resume(); });
        req.on('error', () => {});
        req.end(body);
        reqs.push(req);
      }
      t.defer(() => { for (const r of reqs) r.destroy(); });
      await waitFor(async () => (await mock.stats()).requests >= 2, { timeout_ms: 3000 * SLOW, what: 'two requests dispatched (t=0, t=1 s)' });
      await sleep(300);
      const before = (await mock.stats()).requests;
      const answeredBefore = answered;
      for (const r of reqs) r.destroy();
      const tAbort = Date.now();
      await sleep(2500); // covers the dispatch instants t≈2, 3 s (and 4 s with slack)
      const st = await mock.stats();
      const fresh = await chatTo(p, key, {}, 5000);
      const freshMs = fresh.end - fresh.start;
      const st2 = await mock.stats();
      console.log(`# scenario j: dispatched before the aborts=${before} (answered ${answeredBefore}), mock requests 2.5 s after=${st.requests}; ` +
        `new request after: ${fresh.status} in ${freshMs} ms, x-pacer-queue-ms=${fresh.headers?.['x-pacer-queue-ms']}; mock requests then=${st2.requests}; ` +
        `${Date.now() - tAbort} ms since the aborts; pacerd alive=${p.alive}`);
      assert.ok(before <= 3, `${before} requests dispatched at 1 rps before the aborts`);
      assert.equal(st.requests, before, `${st.requests - before} request(s) of clients that had left reached the mock`);
      assert.equal(fresh.status, 200, `pacerd after the aborts: ${fresh.status} ${fresh.error ?? fresh.body}`);
      assert.ok(freshMs <= 1200 * SLOW, `a new request took ${freshMs} ms after the aborts (1 rps gate: ≤ ~1 s)`);
      assert.equal(st2.requests, before + 1);
      assert.ok(p.alive);
    },
  },
  {
    // limits.max_lanes caps the keys tracked at once: a new key past the cap, with no
    // idle lane to evict, is answered 503 too_many_keys (and never reaches the
    // upstream); once the busy lane is idle again, the new key gets its lane.
    name: 'max_lanes: a new key past the cap with every lane busy gets 503 too_many_keys, then a lane once one is idle',
    timeout_ms: 15000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { limits: { max_lanes: 1 } });
      const busy = chatTo(p, 'sk-lanes-busy', { 'x-mock-delay-ms': '800' });
      await waitFor(async () => (await mock.stats()).in_flight === 1, { timeout_ms: 3000 * SLOW, what: 'the first key in flight' });
      const r = await chatTo(p, 'sk-lanes-new');
      assertPacerError(asResponse(r), 503, 'too_many_keys');
      assert.ok(Number(r.headers['retry-after']) >= 1, `retry-after ${r.headers['retry-after']}`);
      assert.equal((await mock.stats()).requests, 1, 'the refused key reached the upstream');
      assert.equal((await busy).status, 200);
      const again = await chatTo(p, 'sk-lanes-new');
      assert.equal(again.status, 200, `after the busy lane went idle: ${again.status} ${again.body}`);
    },
  },
];
