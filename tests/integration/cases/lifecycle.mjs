// SPDX-License-Identifier: Apache-2.0
// Shutdown: SIGTERM drains (in-flight requests finish, new connections are refused),
// then exit 0; drain_timeout_s bounds it.
import assert from 'node:assert/strict';
import net from 'node:net';
import { SLOW, assertPacerError, parseHttp, request, sleep, streamRequest, tryConnect, waitFor } from '../lib.mjs';

const chat = JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'slow one' }] });

async function waitUpstream(t, n) {
  await waitFor(async () => (await t.mock.stats()).in_flight >= n, { timeout_ms: 3000 * SLOW, what: `${n} request(s) in flight at the mock` });
}

/** A client keep-alive connection: send(raw) resolves with the next response. */
function keepAlive(port) {
  const s = net.connect({ host: '127.0.0.1', port });
  let buf = Buffer.alloc(0);
  let waiter = null;
  s.on('error', () => {});
  s.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    const p = parseHttp(buf);
    if (p.complete && waiter) { const w = waiter; waiter = null; buf = Buffer.alloc(0); w(p); }
  });
  s.on('close', () => { if (waiter) { const w = waiter; waiter = null; w({ status: null, closed: true, headers: {}, body: buf }); } });
  return {
    socket: s,
    ready: new Promise((r) => s.once('connect', r)),
    send: (raw, timeout_ms = 5000) => new Promise((resolve) => {
      const timer = setTimeout(() => { waiter = null; resolve({ status: null, timeout: true, headers: {}, body: buf }); }, timeout_ms * SLOW);
      waiter = (v) => { clearTimeout(timer); resolve(v); };
      s.write(raw);
    }),
  };
}

export const tests = [
  {
    name: 'SIGTERM with a slow request in flight: it completes 200, new connections are refused, exit 0',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.startPacerd();
      const base = (await t.mock.stats()).in_flight;
      const slow = request(`${p.url}/v1/chat/completions`, { method: 'POST', body: chat, headers: { 'x-mock-delay-ms': '1500' }, timeout_ms: 10000 });
      let slowDone = false;
      slow.then(() => { slowDone = true; }, () => { slowDone = true; });
      await waitUpstream(t, base + 1);
      const tSig = Date.now();
      p.signal('SIGTERM');
      // While the slow request is still in flight, connect() must fail.
      let refusedAfter = null;
      for (let i = 0; i < 200 && !slowDone && Date.now() - tSig < 1000 * SLOW; i++) {
        const c = await tryConnect(p.port, 300);
        if (c === 'refused' && !slowDone) { refusedAfter = Date.now() - tSig; break; }
        await sleep(50);
      }
      const r = await slow;
      assert.equal(r.status, 200, r.text());
      assert.equal(r.json().choices[0].message.content, 'tok tok tok tok tok ');
      assert.ok(Date.now() - tSig >= 900, 'the slow request was answered early');
      const exit = await p.proc.waitExit(2000 * SLOW);
      assert.ok(exit, `pacerd still running 2 s after its last request finished`);
      assert.equal(exit.code, 0, `exit ${JSON.stringify(exit)}`);
      assert.ok(refusedAfter !== null, 'connect() kept succeeding during the drain while a request was in flight (listener disabled but still open?)');
      t.note(`new connections refused ${refusedAfter} ms after SIGTERM`);
    },
  },
  {
    name: 'SIGTERM with a stream in flight: the stream runs to its end ([DONE]), then exit 0',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.startPacerd();
      let first;
      const gotFirst = new Promise((r) => { first = r; });
      const s = await streamRequest(`${p.url}/v1/chat/completions`, {
        body: JSON.stringify({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'x' }] }),
        headers: { 'x-mock-chunks': '6', 'x-mock-chunk-ms': '200' },
        onChunk: (c) => { if (c.includes('tok')) first(); },
      });
      t.defer(() => s.req.destroy());
      await Promise.race([gotFirst, sleep(3000 * SLOW)]);
      p.signal('SIGTERM');
      const body = (await s.done).toString();
      assert.equal((body.match(/"content":"tok /g) ?? []).length, 6);
      assert.match(body, /data: \[DONE\]\n\n$/);
      const exit = await p.proc.waitExit(2000 * SLOW);
      assert.ok(exit, 'pacerd still running 2 s after the stream ended');
      assert.equal(exit.code, 0);
    },
  },
  {
    name: 'during the drain, a new request on an open keep-alive connection gets 503 shutting_down',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.startPacerd();
      const c = keepAlive(p.port);
      t.defer(() => c.socket.destroy());
      await c.ready;
      const first = await c.send('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.equal(first.status, 200);
      const base = (await t.mock.stats()).in_flight;
      const slow = request(`${p.url}/v1/chat/completions`, { method: 'POST', body: chat, headers: { 'x-mock-delay-ms': '1500' }, timeout_ms: 10000 });
      slow.catch(() => {});
      await waitUpstream(t, base + 1);
      p.signal('SIGTERM');
      await sleep(200);
      const during = await c.send('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.ok(during.status !== null, `no answer on the keep-alive connection during the drain (${during.closed ? 'closed' : 'timeout'})`);
      assertPacerError({ status: during.status, headers: during.headers, body: during.body }, 503, 'shutting_down');
      assert.match(during.headers['retry-after'] ?? '', /^\d+$/, 'retry-after on shutting_down');
      assert.equal((await slow).status, 200);
      const exit = await p.proc.waitExit(2000 * SLOW);
      assert.equal(exit?.code, 0, `exit ${JSON.stringify(exit)}`);
    },
  },
  {
    name: 'SIGTERM when idle: exit 0 within 2 s; SIGINT likewise',
    fn: async (t) => {
      for (const sig of ['SIGTERM', 'SIGINT']) {
        const p = await t.startPacerd();
        assert.equal((await request(`${p.url}/v1/models`)).status, 200);
        const t0 = Date.now();
        p.signal(sig);
        const exit = await p.proc.waitExit(2000 * SLOW);
        assert.ok(exit, `${sig}: still running after ${Date.now() - t0} ms`);
        assert.equal(exit.code, 0, `${sig}: ${JSON.stringify(exit)}`);
        const events = p.logs().map((l) => l.event);
        assert.ok(events.includes('started') && events.at(-1) === 'stopped', `${sig}: log events ${events.join(',')}`);
      }
    },
  },
  {
    name: 'drain_timeout_s: 1 with a request that would take 6 s: 503 shutting_down, exit 0 within ~1 s',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.startPacerd({ config: { drain_timeout_s: 1 } });
      const base = (await t.mock.stats()).in_flight;
      const slow = request(`${p.url}/v1/chat/completions`, { method: 'POST', body: chat, headers: { 'x-mock-delay-ms': '6000' }, timeout_ms: 10000 });
      slow.catch(() => {});
      await waitUpstream(t, base + 1);
      const t0 = Date.now();
      p.signal('SIGTERM');
      const r = await slow;
      assertPacerError(r, 503, 'shutting_down');
      const exit = await p.proc.waitExit(3000 * SLOW);
      const ms = Date.now() - t0;
      assert.ok(exit, `still running ${ms} ms after SIGTERM`);
      assert.equal(exit.code, 0);
      assert.ok(ms >= 900 && ms < 3000 * SLOW, `exited ${ms} ms after SIGTERM, expected ~1000-2000`);
    },
  },
];
