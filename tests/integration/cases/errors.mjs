// SPDX-License-Identifier: Apache-2.0
// Answers pacerd makes by itself (DESIGN §6): own JSON errors, limits, broken
// clients and broken upstreams. pacerd must survive each and keep serving.
// Upstream faults with their log lines (resets, hangs, DNS, TLS, storms): faults.mjs.
import assert from 'node:assert/strict';
import { SLOW, assertPacerError, freePort, rawHttp, request } from '../lib.mjs';

// One attempt per request, so that every failure is answered at once; small limits.
export const config = async () => ({
  limits: { max_body_bytes: 1024, max_header_bytes: 8192 },
  plans: { default: { retry: { max_attempts: 1 } } },
  providers: {
    down: { upstream: `http://127.0.0.1:${await freePort()}`, prefix: '/down', timeouts: { connect_s: 2 } },
  },
});

async function stillServes(p) {
  const r = await request(`${p.url}/v1/models`, { timeout_ms: 3000 });
  assert.equal(r.status, 200, 'pacerd does not serve the next request');
  assert.ok(p.alive, 'pacerd exited');
}

export const tests = [
  {
    name: '404 unknown_provider when no provider owns the path',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { providers: { openai: null, securemock: null }, default_provider: 'anthropic' } });
      const r = await request(`${p.url}/v1/models`);
      assertPacerError(r, 404, 'unknown_provider');
      assert.ok(r.headers['x-request-id']);
      assert.equal(r.headers['x-pacer-attempts'], '0');
      assert.equal((await request(`${p.url}/anthropic/v1/models`)).status, 200, '/anthropic still routed');
      assert.equal((await t.mock.requests()).length, 1);
    },
  },
  {
    name: '413 body_too_large for a body over limits.max_body_bytes (content-length and chunked); the limit itself passes',
    fn: async (t) => {
      const p = await t.pacerd();
      const at = await request(`${p.url}/echo/limit`, { method: 'POST', body: Buffer.alloc(1024, 0x61) });
      assert.equal(at.status, 200, 'a body of exactly max_body_bytes is accepted');
      assert.equal(at.body.length, 1024);
      await t.mock.reset();
      const over = await rawHttp(p.port, `POST /echo/over HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\n\r\n${'b'.repeat(2048)}`);
      assertPacerError(over, 413, 'body_too_large');
      const chunked = await rawHttp(p.port, `POST /echo/over HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n${'b'.repeat(2048)}\r\n0\r\n\r\n`);
      assertPacerError(chunked, 413, 'body_too_large');
      assert.deepEqual(await t.mock.requests(), [], 'an oversized body was forwarded');
      await stillServes(p);
    },
  },
  {
    name: 'malformed HTTP on a raw socket: 400 bad_request (JSON), and the next request is served',
    fn: async (t) => {
      const p = await t.pacerd();
      // (tests/integration/cases/http1.mjs has one test per kind of malformed request.)
      const bad = ['GARBAGE\r\n\r\n', 'GET /echo HTTP/1.1\r\nNo colon in this header\r\n\r\n', 'GET /echo HTTP/7.0\r\n\r\n', 'GET\r\n\r\n',
        'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
        'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'];
      for (const payload of bad) {
        const r = await rawHttp(p.port, payload, { timeout_ms: 3000 });
        try {
          assertPacerError(r, 400, 'bad_request');
        } catch (e) {
          throw new Error(`${JSON.stringify(payload)} -> ${r.why}: ${e.message}`);
        }
      }
      assert.deepEqual(await t.mock.requests(), []);
      await stillServes(p);
    },
  },
  {
    name: 'headers over limits.max_header_bytes: 431 headers_too_large, and the next request is served',
    fn: async (t) => {
      const p = await t.pacerd();
      const r = await rawHttp(p.port, `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(16000)}\r\n\r\n`, { timeout_ms: 3000 });
      assertPacerError(r, 431, 'headers_too_large');
      const many = Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'v'.repeat(30)}\r\n`).join('');
      const r2 = await rawHttp(p.port, `GET /v1/models HTTP/1.1\r\nHost: x\r\n${many}\r\n`, { timeout_ms: 3000 });
      try {
        assertPacerError(r2, 431, 'headers_too_large');
      } catch (e) {
        throw new Error(`many headers: ${e.message}`);
      }
      assert.deepEqual(await t.mock.requests(), []);
      await stillServes(p);
    },
  },
  {
    name: 'upstream not listening: 502 upstream_unreachable',
    fn: async (t) => {
      const p = await t.pacerd();
      const t0 = Date.now();
      const r = await request(`${p.url}/down/v1/models`, { headers: { authorization: 'Bearer sk-test-down' } });
      assertPacerError(r, 502, 'upstream_unreachable');
      assert.ok(Date.now() - t0 < 3000 * SLOW, `took ${Date.now() - t0} ms`);
      assert.match(r.headers['x-pacer-attempts'] ?? '', /^[1-9]\d*$/);
      assert.ok(r.headers['x-request-id']);
      await stillServes(p);
    },
  },
  {
    name: 'upstream killed after a successful request: 502 upstream_unreachable, not a hang',
    fn: async (t) => {
      const m = await t.startMock();
      const p = await t.startPacerd({ config: { plans: { default: { retry: { max_attempts: 1 } } }, providers: { openai: { upstream: m.url } } } });
      assert.equal((await request(`${p.url}/v1/models`)).status, 200);
      await m.stop();
      const r = await request(`${p.url}/v1/models`, { timeout_ms: 5000 });
      assertPacerError(r, 502, 'upstream_unreachable');
      const r2 = await request(`${p.url}/v1/chat/completions`, { method: 'POST', body: '{}', timeout_ms: 5000 });
      assertPacerError(r2, 502, 'upstream_unreachable');
    },
  },
  {
    name: 'upstream resets a reused keep-alive connection before the headers: 502 after at most one resend by libcurl (max_attempts: 1)',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: { retry: { max_attempts: 1 } } } } });
      // Warm pacerd's upstream connection pool, so that the next request reuses a connection.
      assert.equal((await request(`${p.url}/v1/models`)).status, 200);
      await t.mock.reset();
      const r = await request(`${p.url}/v1/chat/completions`, { method: 'POST', body: '{"model":"gpt-mock"}', headers: { 'x-mock-reset': 'headers' } });
      assertPacerError(r, 502, 'upstream_unreachable');
      assert.equal(r.headers['x-pacer-attempts'], '1');
      // Documented (docs/decisions.md): libcurl 7.88 resends a request once on a
      // fresh connection when a reused one dies before any response byte, and has no option
      // to stop it. pacerd's own retries must add nothing on top of that: exactly 2 here
      // (the reused connection, then libcurl's fresh one), never more.
      const n = (await t.mock.requests()).length;
      assert.equal(n, 2, `the upstream received the POST ${n} times for one client request with retry.max_attempts 1`);
      // On a fresh connection there is no such resend (the test above): one reset, one request.
    },
  },
];
