// SPDX-License-Identifier: Apache-2.0
// Forwarding: what the mock receives is what the client sent (minus hop-by-hop
// headers), and what the client receives is what the mock answered.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import { SLOW, parseHttp, rawHttp, recHeader, recHeaders, request, sha256, sleep, waitFor } from '../lib.mjs';

const headerCount = (r, name) => r.rawHeaders.filter((_, i) => i % 2 === 0 && r.rawHeaders[i].toLowerCase() === name).length;

function assertPacerHeaders(r) {
  assert.equal(r.headers['x-pacer-attempts'], '1', 'x-pacer-attempts');
  assert.match(r.headers['x-pacer-queue-ms'] ?? '', /^\d+$/, 'x-pacer-queue-ms is an integer');
  assert.ok(r.headers['x-request-id'], 'x-request-id present');
}

export const tests = [
  {
    name: 'method, path, query, body and end-to-end headers reach the upstream unchanged',
    fn: async (t) => {
      const p = await t.pacerd();
      const body = JSON.stringify({ model: 'gpt-mock', note: 'ünïcödé ✓', n: [1, 2, 3] });
      const uri = '/echo/some/deep/path?a=1&b=%20x%2Fy&c=&a=2';
      const r = await request(`${p.url}${uri}`, {
        method: 'POST',
        body,
        headers: {
          authorization: 'Bearer sk-test-forward-0001',
          'content-type': 'application/json; charset=utf-8',
          'x-custom-header': 'Value With  Spaces',
          'openai-organization': 'org-test',
          'user-agent': 'itest/1.0',
          accept: 'application/json',
        },
      });
      assert.equal(r.status, 200);
      assert.equal(r.text(), body);
      assert.equal(r.headers['x-mock-uri'], uri);
      assert.equal(r.headers['x-mock-method'], 'POST');
      assert.equal(r.headers['content-type'], 'application/json; charset=utf-8');
      assertPacerHeaders(r);
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.method, 'POST');
      assert.equal(rec.uri, uri);
      assert.equal(rec.body_len, Buffer.byteLength(body));
      assert.equal(rec.body_sha256, sha256(body));
      assert.deepEqual(recHeaders(rec, 'authorization'), ['Bearer sk-test-forward-0001']);
      assert.equal(recHeader(rec, 'x-custom-header'), 'Value With  Spaces');
      assert.equal(recHeader(rec, 'openai-organization'), 'org-test');
      assert.equal(recHeader(rec, 'user-agent'), 'itest/1.0');
      assert.equal(recHeader(rec, 'content-type'), 'application/json; charset=utf-8');
      assert.equal(recHeader(rec, 'content-length'), String(Buffer.byteLength(body)));
    },
  },
  {
    name: 'methods GET, PUT, PATCH, DELETE, HEAD are forwarded as such',
    fn: async (t) => {
      const p = await t.pacerd();
      for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
        const body = method === 'GET' || method === 'DELETE' ? undefined : `body of ${method}`;
        const r = await request(`${p.url}/echo/m`, { method, body });
        assert.equal(r.status, 200, method);
        assert.equal(r.headers['x-mock-method'], method);
        assert.equal(r.text(), body ?? '', method);
      }
      // HEAD: the answer has no body and must not make pacerd wait for one.
      const h = await request(`${p.url}/blob?bytes=1000`, { method: 'HEAD', timeout_ms: 3000 });
      assert.equal(h.status, 200);
      assert.equal(h.headers['content-type'], 'application/octet-stream');
      assert.equal(h.body.length, 0);
      const rs = await t.mock.requests();
      assert.deepEqual(rs.map((x) => x.method), ['GET', 'PUT', 'PATCH', 'DELETE', 'HEAD']);
    },
  },
  {
    name: 'hop-by-hop request headers (and those named in Connection) are not forwarded',
    fn: async (t) => {
      const p = await t.pacerd();
      const payload =
        'POST /echo/hop HTTP/1.1\r\n' +
        `Host: 127.0.0.1:${p.port}\r\n` +
        'Connection: keep-alive, X-Drop-Me, close\r\n' +
        'Keep-Alive: timeout=5, max=100\r\n' +
        'TE: trailers\r\n' +
        'Upgrade: websocket\r\n' +
        'Proxy-Authorization: Basic dXNlcjpwYXNz\r\n' +
        'Proxy-Connection: keep-alive\r\n' +
        'Trailer: X-Checksum\r\n' +
        'X-Drop-Me: secret\r\n' +
        'X-Keep-Me: yes\r\n' +
        'Authorization: Bearer sk-test-hop\r\n' +
        'Content-Type: text/plain\r\n' +
        'Transfer-Encoding: chunked\r\n' +
        '\r\n' +
        '5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n';
      const r = await rawHttp(p.port, payload);
      assert.equal(r.status, 200, `raw answer: ${r.raw.toString('latin1').slice(0, 300)}`);
      assert.equal(r.body.toString(), 'hello world');
      const rec = await t.mock.onlyRequest();
      const names = rec.headers.map(([k]) => k.toLowerCase());
      for (const h of ['connection', 'keep-alive', 'te', 'upgrade', 'proxy-authorization', 'proxy-connection', 'trailer', 'transfer-encoding', 'x-drop-me'])
        assert.ok(!names.includes(h), `${h} was forwarded: ${JSON.stringify(rec.headers)}`);
      assert.equal(recHeader(rec, 'x-keep-me'), 'yes');
      assert.equal(recHeader(rec, 'authorization'), 'Bearer sk-test-hop');
      assert.equal(rec.body_sha256, sha256('hello world'));
    },
  },
  {
    name: 'hop-by-hop response headers are not relayed; other headers are',
    fn: async (t) => {
      const p = await t.pacerd();
      const extra = ['Keep-Alive: timeout=99', 'X-Up-Drop: 1', 'Connection: X-Up-Drop', 'Proxy-Authenticate: Basic realm=x',
        'Upgrade: h2c', 'Trailer: X-T', 'X-Keep: 2', 'openai-processing-ms: 42', 'x-ratelimit-remaining-requests: 7'];
      const r = await request(`${p.url}/blob?bytes=10`, { headers: { 'x-mock-header': extra } });
      assert.equal(r.status, 200);
      for (const h of ['keep-alive', 'x-up-drop', 'proxy-authenticate', 'upgrade', 'trailer'])
        assert.equal(r.headers[h], undefined, `${h} relayed to the client`);
      assert.doesNotMatch(r.headers.connection ?? '', /x-up-drop/i);
      assert.equal(r.headers['x-keep'], '2');
      assert.equal(r.headers['openai-processing-ms'], '42');
      assert.equal(r.headers['x-ratelimit-remaining-requests'], '7');
    },
  },
  {
    name: 'status, headers and body of /blob come back as the mock sends them',
    fn: async (t) => {
      const p = await t.pacerd();
      const n = 1048577;
      const direct = await request(`${t.mock.url}/blob?bytes=${n}`);
      const via = await request(`${p.url}/blob?bytes=${n}`);
      assert.equal(via.status, 200);
      assert.equal(via.body.length, n);
      assert.equal(sha256(via.body), sha256(direct.body));
      assertPacerHeaders(via);
      const strip = (r) => {
        const out = [];
        for (let i = 0; i < r.rawHeaders.length; i += 2) {
          const k = r.rawHeaders[i].toLowerCase();
          if (['date', 'x-request-id', 'x-pacer-attempts', 'x-pacer-queue-ms', 'connection', 'keep-alive'].includes(k)) continue;
          out.push(`${k}: ${r.rawHeaders[i + 1]}`);
        }
        return out.sort();
      };
      assert.deepEqual(strip(via), strip(direct));
      assert.match(via.headers['x-request-id'], /^req_mock_\d+$/);
    },
  },
  {
    name: '10 MiB of random non-UTF-8 bytes round-trip byte-identical through /echo',
    timeout_ms: 30000,
    fn: async (t) => {
      const p = await t.pacerd();
      const body = crypto.randomBytes(10 * 1024 * 1024);
      body[0] = 0xff; body[1] = 0xfe; body[2] = 0x00; // surely not UTF-8
      const r = await request(`${p.url}/echo/big`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' }, timeout_ms: 30000 });
      assert.equal(r.status, 200);
      assert.equal(r.body.length, body.length);
      assert.equal(sha256(r.body), sha256(body), 'response body differs from the request body');
      assert.equal(r.headers['content-type'], 'application/octet-stream');
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_len, body.length);
      assert.equal(rec.body_sha256, sha256(body), 'the mock received different bytes');
    },
  },
  {
    name: 'x-request-id: the client\'s is forwarded; the upstream\'s is relayed; pacerd\'s own answers carry one',
    fn: async (t) => {
      const p = await t.pacerd();
      const r1 = await request(`${p.url}/v1/models`, { headers: { 'x-request-id': 'client-id-123' } });
      assert.equal(r1.status, 200);
      const rec = await t.mock.onlyRequest();
      assert.equal(recHeader(rec, 'x-request-id'), 'client-id-123', 'client id forwarded upstream');
      assert.match(r1.headers['x-request-id'], /^req_mock_\d+$/, 'upstream id relayed');
      assert.equal(headerCount(r1, 'x-request-id'), 1, 'exactly one x-request-id');
      // Own answers (forward-proxy form to a foreign host: 403).
      const own = (hdrs) => rawHttp(p.port, `GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n${hdrs}Connection: close\r\n\r\n`);
      const a = await own('');
      const b = await own('');
      assert.equal(a.status, 403);
      assert.ok(a.headers['x-request-id'], 'generated x-request-id on an own answer');
      assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id'], 'generated ids differ');
      assert.equal(a.headers['x-pacer-attempts'], '0');
      const c = await own('X-Request-Id: client-id-456\r\n');
      assert.equal(c.status, 403);
      assert.equal(c.headers['x-request-id'], 'client-id-456', 'own answer keeps the client id');
    },
  },
  {
    name: 'upstream error statuses are relayed unchanged with their body',
    fn: async (t) => {
      const p = await t.pacerd();
      for (const status of [400, 401, 404, 422]) {
        const hdrs = { 'content-type': 'application/json', 'x-mock-status': String(status), 'x-mock-error-code': `code_${status}`, 'x-mock-error-message': `failure ${status}` };
        const body = JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'x' }] });
        const direct = await request(`${t.mock.url}/v1/chat/completions`, { method: 'POST', headers: hdrs, body });
        const via = await request(`${p.url}/v1/chat/completions`, { method: 'POST', headers: hdrs, body });
        assert.equal(via.status, status);
        assert.equal(via.statusText, direct.statusText);
        assert.equal(via.headers['x-pacer-attempts'], '1', `no retry of a ${status}`);
        const norm = (s) => s.replace(/req_mock_\d+/g, 'req_mock_N');
        assert.equal(norm(via.text()), norm(direct.text()));
        assert.equal(via.json().error.code, `code_${status}`);
      }
      // The mock's own 404 (no route) is relayed, not replaced by a pacerd error.
      const nr = await request(`${p.url}/no/such/route`);
      assert.equal(nr.status, 404);
      assert.equal(nr.json().error.code, 'not_found');
      assert.equal(nr.json().error.type, 'invalid_request_error');
    },
  },
  {
    name: 'keep-alive: several requests on one client connection',
    fn: async (t) => {
      const p = await t.pacerd();
      const one = (i) => `GET /echo/ka${i} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nk${i}`;
      // Pipelined: three requests in one write, three answers in order.
      const r = await rawHttp(p.port, one(1) + one(2) + one(3) + 'GET /blob?bytes=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', { timeout_ms: 5000, untilClose: true });
      assert.equal(r.why, 'closed', 'pacerd closes the connection after "Connection: close"');
      const text = r.raw.toString('latin1');
      const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
      assert.deepEqual(statuses, ['200', '200', '200', '200'], text.slice(0, 500));
      assert.deepEqual([...text.matchAll(/x-mock-uri: (\S+)/gi)].map((m) => m[1]), ['/echo/ka1', '/echo/ka2', '/echo/ka3']);
      assert.equal((await t.mock.requests()).length, 4);
    },
  },
  {
    name: 'Expect: 100-continue (curl, 2 MiB body): body forwarded whole, no Expect header upstream',
    fn: async (t) => {
      const p = await t.pacerd();
      const f = path.join(t.dir, 'upload.bin');
      const body = crypto.randomBytes(2 * 1024 * 1024);
      fs.writeFileSync(f, body);
      const r = await t.curl(['-H', 'Expect: 100-continue', '-H', 'content-type: application/octet-stream', '--data-binary', `@${f}`, `${p.url}/echo/expect`]);
      fs.rmSync(f);
      assert.equal(r.status, 200, r.stderr);
      assert.equal(sha256(r.body), sha256(body));
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_sha256, sha256(body));
      assert.equal(recHeader(rec, 'expect'), undefined, `Expect forwarded: ${recHeader(rec, 'expect')}`);
    },
  },
  {
    name: 'a request body sent slowly in pieces is forwarded whole',
    fn: async (t) => {
      const p = await t.pacerd();
      const parts = ['{"model":"gpt-mock",', '"messages":[{"role":"user",', '"content":"slowly"}]}'];
      const body = parts.join('');
      const s = net.connect({ host: '127.0.0.1', port: p.port });
      t.defer(() => s.destroy());
      let got = Buffer.alloc(0);
      s.on('data', (d) => { got = Buffer.concat([got, d]); });
      s.on('error', () => {});
      await new Promise((r) => s.once('connect', r));
      s.write(`POST /echo/slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
      for (const part of parts) { await sleep(200); s.write(part); }
      await waitFor(() => parseHttp(got).complete, { timeout_ms: 3000 * SLOW, what: 'the answer' });
      const r = parseHttp(got);
      assert.equal(r.status, 200);
      assert.equal(r.body.toString(), body);
      assert.equal((await t.mock.onlyRequest()).body_sha256, sha256(body));
    },
  },
  {
    name: 'Content-Encoding: gzip request body and Accept-Encoding are passed through untouched',
    fn: async (t) => {
      const p = await t.pacerd();
      const gz = zlib.gzipSync(Buffer.from(JSON.stringify({ model: 'gpt-mock', input: 'x'.repeat(5000) })));
      const r = await request(`${p.url}/echo/gz`, { method: 'POST', body: gz, headers: { 'content-encoding': 'gzip', 'content-type': 'application/json', 'accept-encoding': 'gzip, br' } });
      assert.equal(r.status, 200);
      assert.equal(sha256(r.body), sha256(gz), 'the body was re-encoded');
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_sha256, sha256(gz));
      assert.equal(recHeader(rec, 'content-encoding'), 'gzip');
      assert.equal(recHeader(rec, 'accept-encoding'), 'gzip, br');
    },
  },
  {
    name: '60 concurrent requests (plain, streamed, large) each get their own answer',
    timeout_ms: 30000,
    fn: async (t) => {
      const p = await t.pacerd();
      const jobs = [];
      for (let i = 0; i < 60; i++) {
        if (i % 3 === 0) {
          const body = crypto.randomBytes(1000 + i * 1000);
          jobs.push(request(`${p.url}/echo/c${i}`, { method: 'POST', body, timeout_ms: 20000 }).then((r) => {
            assert.equal(r.status, 200, `echo ${i}`);
            assert.equal(r.headers['x-mock-uri'], `/echo/c${i}`);
            assert.equal(sha256(r.body), sha256(body), `echo ${i}: body of another request?`);
          }));
        } else if (i % 3 === 1) {
          const body = JSON.stringify({ model: `m-${i}`, stream: true, messages: [{ role: 'user', content: 'c' }] });
          jobs.push(request(`${p.url}/v1/chat/completions`, { method: 'POST', body, headers: { 'x-mock-chunks': String(3 + (i % 7)), 'x-mock-chunk-ms': '20' }, timeout_ms: 20000 }).then((r) => {
            const text = r.text();
            assert.equal(r.status, 200, `stream ${i}`);
            assert.equal((text.match(/"content":"tok /g) ?? []).length, 3 + (i % 7), `stream ${i}`);
            assert.ok(!text.includes('"model":"m-') || [...text.matchAll(/"model":"([^"]+)"/g)].every((m) => m[1] === `m-${i}`), `stream ${i} got chunks of another stream`);
            assert.match(text, /data: \[DONE\]\n\n$/);
          }));
        } else {
          jobs.push(request(`${p.url}/blob?bytes=${300000 + i}`, { timeout_ms: 20000 }).then((r) => {
            assert.equal(r.status, 200);
            assert.equal(r.body.length, 300000 + i, `blob ${i}`);
          }));
        }
      }
      const res = await Promise.allSettled(jobs);
      const bad = res.filter((x) => x.status === 'rejected');
      assert.equal(bad.length, 0, `${bad.length} of 60 failed; first: ${bad[0]?.reason?.message}`);
      assert.equal((await t.mock.stats()).requests, 60);
    },
  },
  {
    name: 'HTTP/1.0 client: a plain answer and a stream, each ended by the connection close',
    fn: async (t) => {
      const p = await t.pacerd();
      const a = await rawHttp(p.port, 'GET /v1/models HTTP/1.0\r\n\r\n', { timeout_ms: 5000, untilClose: true });
      assert.equal(a.why, 'closed', 'HTTP/1.0 connection not closed');
      assert.equal(a.status, 200);
      assert.match(a.body.toString(), /gpt-mock/);
      const body = JSON.stringify({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'x' }] });
      const s = await rawHttp(p.port, `POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, { timeout_ms: 5000, untilClose: true });
      assert.equal(s.why, 'closed');
      assert.equal(s.status, 200);
      assert.ok(!/chunked/i.test(s.headers['transfer-encoding'] ?? ''), 'chunked encoding sent to an HTTP/1.0 client');
      assert.equal((s.body.toString().match(/"content":"tok /g) ?? []).length, 5);
      assert.match(s.body.toString(), /data: \[DONE\]\n\n$/);
    },
  },
];
