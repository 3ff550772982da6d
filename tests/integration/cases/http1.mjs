// SPDX-License-Identifier: Apache-2.0
// pacerd's own HTTP/1.1 server layer, on raw sockets: strict parsing (every malformed
// or ambiguous request is refused with 400 and the connection closed, nothing is
// forwarded), header and body limits (431, 413 before the body is read),
// Expect: 100-continue, pipelining, HTTP/1.0 and Connection: close, chunked request
// bodies, methods pacerd refuses, limits.max_connections and limits.client_timeout_s.
//
// Every answer pacerd makes itself is JSON, {"error":{"message","type":"pacer_error",
// "code"}} plus a newline, with content-type: application/json, content-length and
// x-request-id; an answer that ends the connection also says connection: close.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { SLOW, assertPacerError, recHeader, request, sha256, sleep } from '../lib.mjs';

// Small limits for the shared pacerd; tests that need the defaults start their own.
export const config = {
  limits: { max_body_bytes: 1024, max_header_bytes: 8192 },
  plans: { default: { retry: { max_attempts: 1 } } },
};

// ---------------------------------------------------------------- raw connections

/**
 * Parses the complete HTTP/1.x responses at the start of buf, in order: each
 * {version, status, reason, headers (lower-case names, repeated ones joined by ", "),
 * rawHead, body}. An answer without framing (no content-length, not chunked, not
 * 1xx/204/304) runs until the connection closes. rest: the bytes after the last
 * complete response.
 */
export function parseResponses(buf, closed = false) {
  const responses = [];
  let off = 0;
  for (let guard = 0; guard < 10000 && off < buf.length; guard++) {
    const one = parseOne(buf.subarray(off), closed);
    if (!one) break;
    responses.push(one.response);
    off += one.consumed;
  }
  return { responses, rest: buf.subarray(off) };
}

function parseOne(buf, closed) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const rawHead = buf.subarray(0, end).toString('latin1');
  const lines = rawHead.split('\r\n');
  const m = /^HTTP\/(\d\.\d) (\d{3})(?: (.*))?$/.exec(lines[0]);
  if (!m) return null;
  const headers = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i < 0) continue;
    const k = line.slice(0, i).trim().toLowerCase();
    const v = line.slice(i + 1).trim();
    headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
  }
  const status = Number(m[2]);
  const response = { version: m[1], status, reason: m[3] ?? '', headers, rawHead, body: Buffer.alloc(0) };
  let pos = end + 4;
  if ((status >= 100 && status < 200) || status === 204 || status === 304) return { response, consumed: pos };
  if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    if (buf.length < pos + n) return null;
    response.body = buf.subarray(pos, pos + n);
    return { response, consumed: pos + n };
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts = [];
    for (let i = 0; i < 1000000; i++) {
      const le = buf.indexOf('\r\n', pos);
      if (le < 0) return null;
      const size = parseInt(buf.subarray(pos, le).toString('latin1'), 16);
      if (Number.isNaN(size)) return null;
      if (size === 0) {
        // Trailer section: lines until an empty one.
        let p = le + 2;
        for (;;) {
          const te = buf.indexOf('\r\n', p);
          if (te < 0) return null;
          if (te === p) { response.body = Buffer.concat(parts); return { response, consumed: te + 2 }; }
          p = te + 2;
        }
      }
      if (buf.length < le + 2 + size + 2) return null;
      parts.push(buf.subarray(le + 2, le + 2 + size));
      pos = le + 2 + size + 2;
    }
    return null;
  }
  if (!closed) return null;
  response.body = buf.subarray(pos);
  return { response, consumed: buf.length };
}

/** A client connection on a raw socket: bytes collected, close and reset noted. */
export class Conn {
  constructor(port) {
    this.buf = Buffer.alloc(0);
    this.closed = false;
    this.closedAt = null;
    this.error = null;
    this.waiters = new Set();
    this.s = net.connect({ host: '127.0.0.1', port });
    this.ready = new Promise((resolve, reject) => {
      this.s.once('connect', resolve);
      this.s.once('error', reject);
    });
    this.ready.catch(() => {});
    this.s.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.kick(); });
    this.s.on('error', (e) => { this.error = e.code ?? e.message; });
    this.s.on('close', () => { this.closed = true; this.closedAt = Date.now(); this.kick(); });
  }

  kick() { for (const w of [...this.waiters]) w(); }

  write(data) { if (!this.s.destroyed) this.s.write(data); }

  destroy() { this.s.destroy(); }

  responses() { return parseResponses(this.buf, this.closed); }

  describe() {
    const text = this.buf.toString('latin1');
    return `connection ${this.closed ? `closed${this.error ? ` (${this.error})` : ''}` : 'open'}, ${this.buf.length} bytes received: ` +
      JSON.stringify(text.length > 400 ? `${text.slice(0, 300)}…${text.slice(-100)}` : text);
  }

  /** Resolves with pred(this) once truthy; rejects after timeout_ms (× SLOW). */
  until(pred, timeout_ms, what) {
    return new Promise((resolve, reject) => {
      let timer = null;
      const done = () => { clearTimeout(timer); this.waiters.delete(check); };
      const check = () => {
        let v;
        try { v = pred(this); } catch (e) { done(); reject(e); return; }
        if (v) { done(); resolve(v); }
      };
      timer = setTimeout(() => { done(); reject(new Error(`${what}: not within ${timeout_ms * SLOW} ms; ${this.describe()}`)); }, timeout_ms * SLOW);
      this.waiters.add(check);
      check();
    });
  }

  /** The first n complete responses (or fewer when the connection closes first). */
  async waitResponses(n, timeout_ms = 5000, what = `${n} response(s)`) {
    await this.until((c) => c.closed || c.responses().responses.length >= n, timeout_ms, what);
    return this.responses().responses;
  }

  async waitClosed(timeout_ms, what = 'the server to close the connection') {
    await this.until((c) => c.closed, timeout_ms, what);
  }
}

async function open(t, port) {
  const c = new Conn(port);
  t.defer(() => c.destroy());
  await c.ready;
  return c;
}

/** VmData and VmRSS of a process, in KiB (/proc/PID/status). */
function vmKiB(pid) {
  const v = {};
  for (const line of fs.readFileSync(`/proc/${pid}/status`, 'latin1').split('\n')) {
    const m = /^(VmData|VmRSS):\s+(\d+) kB/.exec(line);
    if (m) v[m[1]] = Number(m[2]);
  }
  return v;
}

/**
 * Writes rest on c's socket (its head and first bytes already sent), then reads
 * the answer without keeping it: its status, and the length and SHA-256 of its body.
 */
function sendRestAndHashEcho(port, c, rest) {
  return new Promise((resolve, reject) => {
    const s = c.s;
    s.removeAllListeners('data');
    let head = Buffer.alloc(0), want = -1, got = 0, status = 0, headText = '';
    const hash = crypto.createHash('sha256');
    const timer = setTimeout(() => reject(new Error(`no whole answer in ${30000 * SLOW} ms: ${headText} ${got}/${want}`)), 30000 * SLOW);
    const feed = (d) => {
      if (want < 0) {
        head = Buffer.concat([head, d]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        headText = head.subarray(0, end).toString('latin1');
        status = Number(/^HTTP\/1\.1 (\d{3})/.exec(headText)?.[1] ?? 0);
        want = Number(/\r\ncontent-length: *(\d+)/i.exec(headText)?.[1] ?? 0);
        d = head.subarray(end + 4);
      }
      hash.update(d);
      got += d.length;
      if (got >= want) {
        clearTimeout(timer);
        s.off('data', feed);
        resolve({ status, head: headText, length: got, sha256: hash.digest('hex') });
      }
    };
    s.on('data', feed);
    s.on('close', () => { clearTimeout(timer); reject(new Error(`closed: ${headText} ${got}/${want}`)); });
    // In pieces, as a client on a real network would.
    for (let off = 0; off < rest.length; off += 1 << 20) s.write(rest.subarray(off, off + (1 << 20)));
  });
}

// ---------------------------------------------------------------- assertions

/** A pacerd-made answer: status, JSON error with code, content-type, content-length, x-request-id. */
function assertOwnAnswer(r, status, code, what = '') {
  const pre = what ? `${what}: ` : '';
  try {
    assertPacerError({ status: r.status, headers: r.headers, body: r.body }, status, code);
  } catch (e) {
    throw new Error(`${pre}${e.message}`);
  }
  assert.equal(r.headers['content-length'], String(r.body.length), `${pre}content-length of pacerd's own answer`);
  assert.ok(r.headers['x-request-id'], `${pre}no x-request-id on pacerd's own answer`);
  assert.ok(r.body.toString('latin1').endsWith('}\n'), `${pre}the JSON error body does not end with a newline`);
}

/** pacerd still serves a normal request of another client, and the mock saw nothing of `what`. */
async function nothingForwardedAndStillServes(t, p, what) {
  const rs = await t.mock.requests();
  assert.deepEqual(rs.map((x) => `${x.method} ${x.uri}`), [], `${what}: something reached the upstream`);
  const r = await request(`${p.url}/v1/models`, { timeout_ms: 3000 });
  assert.equal(r.status, 200, `${what}: another client's request afterwards got ${r.status}`);
  assert.ok(p.alive, 'pacerd exited');
}

/**
 * Sends payload on a new connection; expects exactly one answer from pacerd itself
 * (status, code), marked connection: close, and then the connection closed with
 * nothing after the answer. cleanEof: the close must be an EOF, not a reset (when
 * pacerd has read everything the client sent, it has no reason to reset).
 */
async function expectRefused(t, port, payload, status, code, { what = '', cleanEof = true, timeout_ms = 3000 } = {}) {
  const c = await open(t, port);
  c.write(payload);
  const rs = await c.waitResponses(1, timeout_ms, `${what}: an answer`);
  assert.ok(rs.length >= 1, `${what}: the connection was closed without an answer (expected ${status} ${code}); ${c.describe()}`);
  const r = rs[0];
  assertOwnAnswer(r, status, code, what);
  assert.match(r.headers.connection ?? '', /\bclose\b/i, `${what}: the ${status} answer does not say connection: close`);
  await c.waitClosed(2000, `${what}: the server to close the connection after the ${status}`);
  const all = c.responses();
  assert.equal(all.responses.length, 1, `${what}: more than one answer on the connection; ${c.describe()}`);
  assert.equal(all.rest.length, 0, `${what}: bytes after the ${status} answer; ${c.describe()}`);
  if (cleanEof) assert.equal(c.error, null, `${what}: the connection ended with ${c.error}, not an EOF`);
  return r;
}

// ---------------------------------------------------------------- malformed requests

const smuggled = 'GET /echo/smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
const req = (head, rest = '') => `${head}\r\n\r\n${rest}`;

// Each: a request that must be refused with 400 bad_request, the connection closed,
// nothing forwarded (several carry a second request that a lax parser would smuggle
// through). libhttp-parser 2.9.4 rejects most by itself; obs-fold and the HTTP
// versions it accepts, so pacerd must check those itself.
const malformed = [
  ['NUL in a header value', req('GET /echo/nul HTTP/1.1\r\nHost: x\r\nX-A: a\0b')],
  // libhttp-parser does not check the first byte of a value: pacerd does.
  ['NUL as the first byte of a header value', req('GET /echo/nul HTTP/1.1\r\nHost: x\r\nX-A: \0b')],
  ['a control character (0x06) starting a header value', req('GET /echo/ctl HTTP/1.1\r\nHost: x\r\nX-A: \x06b')],
  ['bare CR in a header value', req('GET /echo/cr HTTP/1.1\r\nHost: x\r\nX-A: a\rb')],
  // RFC 9112 §2.2 lets a recipient accept a bare LF as a line terminator, and
  // libhttp-parser 2.9.4 does, consistently ("GET / HTTP/1.1\nHost: x\n\n" parses as
  // a request). So a bare LF is tested where it leaves a line that is no header
  // field: inside a field name, and inside a field value.
  // pacerd refuses a bare LF anywhere in a request head, also as a whole line end.
  ['bare LF as the line end of a request head', 'GET /echo/lf HTTP/1.1\nHost: x\n\n'],
  ['bare LF inside a header field name', req('GET /echo/lf HTTP/1.1\r\nHost: x\r\nX-A\nB: c')],
  ['bare LF inside a header field value', req('GET /echo/lf HTTP/1.1\r\nHost: x\r\nX-A: a\nb c')],
  ['two different Content-Length values', req('POST /echo/cl HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 43', smuggled)],
  ['two identical Content-Length headers', req('POST /echo/cl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5', 'hello')],
  ['Content-Length with Transfer-Encoding: chunked',
    req('POST /echo/clte HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked', `0\r\n\r\n${smuggled}`)],
  ['Transfer-Encoding: gzip', req('POST /echo/te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip', 'abc')],
  ['Transfer-Encoding: chunked, gzip', req('POST /echo/te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip', `3\r\nabc\r\n0\r\n\r\n`)],
  ['obs-fold (a header line starting with a space continues the previous one)',
    req('GET /echo/fold HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b')],
  ['obs-fold with a tab', req('GET /echo/fold HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb')],
  ['a bad chunk size (zz)', req('POST /echo/chunk HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked', 'zz\r\nabc\r\n0\r\n\r\n')],
  ['an invalid method token (G(T)', req('G(T /v1/models HTTP/1.1\r\nHost: x')],
  ['an unknown method (FOO)', req('FOO /v1/models HTTP/1.1\r\nHost: x')],
  ['HTTP/2.0 in the request line', req('GET /v1/models HTTP/2.0\r\nHost: x')],
  ['HTTP/7.0 in the request line', req('GET /v1/models HTTP/7.0\r\nHost: x')],
];

const malformedTests = malformed.map(([what, payload]) => ({
  name: `400 bad_request and close: ${what}; nothing forwarded; the next client is served`,
  fn: async (t) => {
    const p = await t.pacerd();
    await expectRefused(t, p.port, payload, 400, 'bad_request', { what });
    await nothingForwardedAndStillServes(t, p, what);
  },
}));

// ---------------------------------------------------------------- the tests

export const tests = [
  ...malformedTests,

  // ---- limits.max_header_bytes
  {
    name: '431 headers_too_large and close: a 70 KB request line (default max_header_bytes 65536)',
    fn: async (t) => {
      const p = await t.startPacerd(); // the base configuration: default header limit
      const line = `GET /v1/models?x=${'a'.repeat(70 * 1024)} HTTP/1.1`;
      // pacerd may stop reading at the limit: a reset after the answer is tolerated.
      await expectRefused(t, p.port, `${line}\r\nHost: x\r\n\r\n`, 431, 'headers_too_large', { what: '70 KB request line', cleanEof: false });
      await nothingForwardedAndStillServes(t, p, '70 KB request line');
      await t.mock.reset();
      // Just under the default limit is fine (the model list: a small answer).
      const okTarget = `/v1/models?x=${'a'.repeat(60 * 1024)}`;
      const r = await request(`${p.url}${okTarget}`);
      assert.equal(r.status, 200, 'a 60 KB request line (limit 64 KiB) was refused');
      assert.equal((await t.mock.onlyRequest()).uri, okTarget);
    },
  },
  {
    name: '431 headers_too_large and close: a header block over limits.max_header_bytes (8192): one large header, many headers',
    fn: async (t) => {
      const p = await t.pacerd();
      await expectRefused(t, p.port, `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(10000)}\r\n\r\n`, 431, 'headers_too_large',
        { what: 'one 10 KB header', cleanEof: false });
      const many = Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'v'.repeat(30)}\r\n`).join('');
      await expectRefused(t, p.port, `GET /v1/models HTTP/1.1\r\nHost: x\r\n${many}\r\n`, 431, 'headers_too_large',
        { what: '400 headers (~16 KB)', cleanEof: false });
      await nothingForwardedAndStillServes(t, p, 'header block over the limit');
      // Well under the limit (about 6 KB of headers) passes.
      const r = await request(`${p.url}/echo/under`, { headers: { 'x-big': 'a'.repeat(6000) } });
      assert.equal(r.status, 200, 'a 6 KB header block (limit 8192) was refused');
    },
  },

  // ---- limits.max_body_bytes
  {
    name: '413 body_too_large before the body is read: Content-Length over max_body_bytes, headers only, then close',
    fn: async (t) => {
      const p = await t.pacerd();
      // Only the headers: the answer must come without any body byte sent.
      const r = await expectRefused(t, p.port, 'POST /echo/big HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2048\r\n\r\n',
        413, 'body_too_large', { what: 'Content-Length 2048 (limit 1024), no body sent' });
      assert.ok(!/continue/i.test(r.rawHead), 'the 413 is not a 100 Continue');
      await nothingForwardedAndStillServes(t, p, 'Content-Length over the limit');
    },
  },
  {
    name: '413 body_too_large and close: a chunked body that grows past max_body_bytes',
    fn: async (t) => {
      const p = await t.pacerd();
      const chunk = `200\r\n${'c'.repeat(512)}\r\n`;
      await expectRefused(t, p.port, `POST /echo/big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${chunk}${chunk}${chunk}0\r\n\r\n`,
        413, 'body_too_large', { what: 'chunked, 3 × 512 bytes (limit 1024)', cleanEof: false });
      await nothingForwardedAndStillServes(t, p, 'chunked body over the limit');
    },
  },
  {
    name: 'a body of exactly max_body_bytes passes (Content-Length and chunked)',
    fn: async (t) => {
      const p = await t.pacerd();
      const body = Buffer.alloc(1024, 0x61);
      const a = await request(`${p.url}/echo/exact`, { method: 'POST', body });
      assert.equal(a.status, 200, a.text().slice(0, 200));
      assert.equal(sha256(a.body), sha256(body));
      const c = await open(t, p.port);
      c.write(`POST /echo/exact-chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200\r\n${'a'.repeat(512)}\r\n200\r\n${'a'.repeat(512)}\r\n0\r\n\r\n`);
      const [r] = await c.waitResponses(1);
      assert.ok(r, `no answer to a chunked body of exactly the limit; ${c.describe()}`);
      assert.equal(r.status, 200, r.body.toString().slice(0, 200));
      assert.equal(sha256(r.body), sha256(body));
      const rs = await t.mock.requests();
      assert.deepEqual(rs.map((x) => x.body_len), [1024, 1024]);
    },
  },

  // ---- Expect: 100-continue
  {
    // A declared length is a limit, not an allocation (issue 27.6). Untouched pages
    // do not count in VmRSS, so the old up-front allocation showed in VmData (the
    // heap and mappings the process holds: +512 MiB here), which is what an
    // RLIMIT_DATA or a strict overcommit policy counts; both are read.
    name: 'a declared Content-Length is a limit, not an allocation: 16 clients declaring 32 MiB and sending 10 bytes cost pacerd kilobytes; a full 32 MiB body still arrives intact',
    timeout_ms: 60000 * SLOW,
    fn: async (t) => {
      const MAX = 32 << 20;
      const p = await t.startPacerd({ config: { log: { level: 'warn' }, limits: { max_body_bytes: MAX } } });
      const warm = await request(`${p.url}/echo/warm`, { method: 'POST', body: 'warm' });
      assert.equal(warm.status, 200);
      const before = vmKiB(p.pid);
      const stalled = [];
      for (let i = 0; i < 16; i++) {
        const c = await open(t, p.port);
        c.write(`POST /echo/stalled HTTP/1.1\r\nHost: x\r\nContent-Length: ${MAX}\r\n\r\n0123456789`);
        stalled.push(c);
      }
      // Every head has been read once a request sent after them is answered (one loop).
      await sleep(200);
      assert.equal((await request(`${p.url}/v1/models`)).status, 200);
      const during = vmKiB(p.pid);
      const grew = { VmData: during.VmData - before.VmData, VmRSS: during.VmRSS - before.VmRSS };
      assert.ok(grew.VmData < 8 * 1024, `VmData grew by ${grew.VmData} KiB for 16 stalled 32 MiB bodies (before ${JSON.stringify(before)}, during ${JSON.stringify(during)})`);
      assert.ok(grew.VmRSS < 8 * 1024, `VmRSS grew by ${grew.VmRSS} KiB for 16 stalled 32 MiB bodies`);
      for (const c of stalled.slice(1)) {
        assert.ok(!c.closed, `a stalled upload was closed: ${c.describe()}`);
        c.destroy();
      }

      // The first one goes on: its body arrives whole, echoed back byte for byte.
      const body = crypto.randomBytes(MAX);
      body.write('0123456789', 0, 'latin1');
      const echoed = await sendRestAndHashEcho(p.port, stalled[0], body.subarray(10));
      assert.equal(echoed.status, 200, echoed.head);
      assert.equal(echoed.length, MAX);
      assert.equal(echoed.sha256, sha256(body));
      const rec = (await t.mock.requests()).filter((r) => r.uri === '/echo/stalled');
      assert.equal(rec.length, 1, JSON.stringify(rec.map((r) => r.uri)));
      assert.equal(rec[0].body_len, MAX);
      assert.equal(rec[0].body_sha256, sha256(body));
    },
  },
  {
    name: 'Expect: 100-continue: "HTTP/1.1 100 Continue" before the body is sent, then the final answer',
    fn: async (t) => {
      const p = await t.pacerd();
      const body = 'hello world';
      const c = await open(t, p.port);
      c.write(`POST /echo/expect HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`);
      await c.until((x) => x.closed || x.buf.includes('\r\n\r\n'), 3000, 'the 100 Continue');
      assert.equal(c.buf.toString('latin1'), 'HTTP/1.1 100 Continue\r\n\r\n', `expected exactly the interim 100 Continue; ${c.describe()}`);
      assert.deepEqual(await t.mock.requests(), [], 'forwarded before the body was sent');
      c.write(body);
      const rs = await c.waitResponses(2, 5000, 'the final answer');
      assert.equal(rs.length, 2, c.describe());
      assert.equal(rs[1].status, 200);
      assert.equal(rs[1].body.toString(), body);
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_sha256, sha256(body));
      assert.equal(recHeader(rec, 'expect'), undefined, 'Expect forwarded upstream');
      assert.ok(!c.closed, 'the connection was closed after a normal answer');
    },
  },
  {
    name: 'Expect: 100-continue with a Content-Length over the limit: 413 body_too_large, no 100, close',
    fn: async (t) => {
      const p = await t.pacerd();
      const r = await expectRefused(t, p.port,
        'POST /echo/expect HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\nExpect: 100-continue\r\n\r\n', 413, 'body_too_large',
        { what: 'Expect: 100-continue, Content-Length 4096' });
      assert.notEqual(r.status, 100);
      await nothingForwardedAndStillServes(t, p, 'Expect: 100-continue over the limit');
    },
  },

  // ---- pipelining
  {
    name: 'pipelining: three requests in one write (slow GET /v1/models, POST echo, GET echo) answered in order',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = await open(t, p.port);
      // The first is the slowest at the upstream: answers must still come in request order.
      c.write('GET /v1/models HTTP/1.1\r\nHost: x\r\nx-mock-delay-ms: 300\r\n\r\n' +
        'POST /echo/p2 HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nsecond' +
        'GET /echo/p3 HTTP/1.1\r\nHost: x\r\n\r\n');
      const rs = await c.waitResponses(3, 5000);
      assert.equal(rs.length, 3, c.describe());
      assert.deepEqual(rs.map((r) => r.status), [200, 200, 200]);
      assert.match(rs[0].body.toString(), /"gpt-mock"/, 'first answer is not the model list');
      assert.equal(rs[0].headers['x-mock-uri'], undefined);
      assert.equal(rs[1].headers['x-mock-uri'], '/echo/p2');
      assert.equal(rs[1].body.toString(), 'second');
      assert.equal(rs[2].headers['x-mock-uri'], '/echo/p3');
      assert.equal(rs[2].headers['x-mock-method'], 'GET');
      assert.equal(rs[2].body.length, 0);
      assert.equal(c.responses().rest.length, 0);
      assert.ok(!c.closed, 'keep-alive connection closed after pipelined requests');
    },
  },
  {
    name: 'pipelining with a stream first: the SSE stream, then the two echoes, in order',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = await open(t, p.port);
      const chat = JSON.stringify({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'pipelined' }] });
      c.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-mock-chunks: 4\r\nx-mock-chunk-ms: 100\r\nContent-Length: ${chat.length}\r\n\r\n${chat}` +
        'POST /echo/s2 HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\ntwo' +
        'GET /echo/s3 HTTP/1.1\r\nHost: x\r\n\r\n');
      const rs = await c.waitResponses(3, 8000);
      assert.equal(rs.length, 3, c.describe());
      assert.deepEqual(rs.map((r) => r.status), [200, 200, 200]);
      assert.match(rs[0].headers['content-type'] ?? '', /^text\/event-stream/);
      const sse = rs[0].body.toString();
      assert.equal((sse.match(/"content":"tok /g) ?? []).length, 4, sse.slice(0, 300));
      assert.match(sse, /data: \[DONE\]\n\n$/);
      assert.equal(rs[1].headers['x-mock-uri'], '/echo/s2');
      assert.equal(rs[1].body.toString(), 'two');
      assert.equal(rs[2].headers['x-mock-uri'], '/echo/s3');
      assert.ok(!c.closed, 'keep-alive connection closed after pipelined requests');
    },
  },

  // ---- HTTP/1.0, Connection: close
  {
    name: 'HTTP/1.0 without keep-alive: answered, then the server closes',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = await open(t, p.port);
      c.write('GET /echo/h10 HTTP/1.0\r\n\r\n');
      await c.waitClosed(3000, 'the server to close an HTTP/1.0 connection after the answer');
      const { responses, rest } = c.responses();
      assert.equal(responses.length, 1, c.describe());
      assert.equal(responses[0].status, 200);
      assert.equal(responses[0].headers['x-mock-uri'], '/echo/h10');
      assert.ok(!/chunked/i.test(responses[0].headers['transfer-encoding'] ?? ''), 'chunked answer to an HTTP/1.0 client');
      assert.equal(rest.length, 0);
      assert.equal(c.error, null, `closed by ${c.error}, not an EOF`);
    },
  },
  {
    name: 'HTTP/1.0 with Connection: keep-alive: the answer says keep-alive, a second request on the socket works',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = await open(t, p.port);
      c.write('GET /echo/k1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
      const [a] = await c.waitResponses(1, 3000);
      assert.ok(a, `no answer; ${c.describe()}`);
      assert.equal(a.status, 200);
      assert.match(a.headers.connection ?? '', /keep-alive/i, `HTTP/1.0 keep-alive answer without "connection: keep-alive": ${a.rawHead}`);
      assert.ok(a.headers['content-length'] !== undefined, 'a keep-alive answer to HTTP/1.0 needs a content-length');
      await sleep(200);
      assert.ok(!c.closed, 'the server closed an HTTP/1.0 keep-alive connection');
      c.write('GET /echo/k2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
      const rs = await c.waitResponses(2, 3000);
      assert.equal(rs.length, 2, c.describe());
      assert.equal(rs[1].status, 200);
      assert.equal(rs[1].headers['x-mock-uri'], '/echo/k2');
      // Without keep-alive the next one ends the connection.
      c.write('GET /echo/k3 HTTP/1.0\r\n\r\n');
      await c.waitClosed(3000);
      const all = c.responses().responses;
      assert.equal(all.length, 3);
      assert.equal(all[2].headers['x-mock-uri'], '/echo/k3');
    },
  },
  {
    name: 'HTTP/1.1 Connection: close: answered with connection: close, then closed',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = await open(t, p.port);
      c.write('GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      await c.waitClosed(3000);
      const { responses, rest } = c.responses();
      assert.equal(responses.length, 1, c.describe());
      assert.equal(responses[0].status, 200);
      assert.match(responses[0].headers.connection ?? '', /\bclose\b/i, 'no connection: close on the answer');
      assert.equal(rest.length, 0);
      assert.equal(c.error, null, `closed by ${c.error}, not an EOF`);
    },
  },

  // ---- chunked request bodies
  {
    name: 'a chunked request body (sent in pieces) reaches the upstream de-chunked, with a content-length',
    fn: async (t) => {
      const p = await t.pacerd();
      const parts = ['{"model":"gpt-mock",', '"input":"chunked ', 'body \u00e9"}'];
      const body = Buffer.from(parts.join(''));
      const c = await open(t, p.port);
      c.write('POST /echo/chunked HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      for (const part of parts) {
        const b = Buffer.from(part);
        await sleep(50);
        c.write(Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]));
      }
      await sleep(50);
      c.write('0\r\n\r\n');
      const [r] = await c.waitResponses(1, 3000);
      assert.ok(r, c.describe());
      assert.equal(r.status, 200);
      assert.equal(sha256(r.body), sha256(body));
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_len, body.length);
      assert.equal(rec.body_sha256, sha256(body));
      assert.equal(recHeader(rec, 'content-length'), String(body.length), 'no (or a wrong) content-length upstream');
      assert.equal(recHeader(rec, 'transfer-encoding'), undefined, 'transfer-encoding forwarded upstream');
    },
  },

  // ---- methods pacerd refuses
  {
    name: 'CONNECT to a host that is not a provider: 403 host_not_allowed (JSON), connection: close, then closed',
    fn: async (t) => {
      const p = await t.pacerd();
      await expectRefused(t, p.port, 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n', 403, 'host_not_allowed',
        { what: 'CONNECT' });
      await nothingForwardedAndStillServes(t, p, 'CONNECT');
    },
  },
  {
    name: 'TRACE: 405 method_not_allowed (JSON)',
    fn: async (t) => {
      const p = await t.pacerd();
      const c = await open(t, p.port);
      c.write('TRACE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
      const [r] = await c.waitResponses(1, 3000);
      assert.ok(r, c.describe());
      assertOwnAnswer(r, 405, 'method_not_allowed', 'TRACE');
      await nothingForwardedAndStillServes(t, p, 'TRACE');
    },
  },

  // ---- limits.max_connections
  {
    name: 'limits.max_connections 1000: 5,000 clients at once are all served, never more than 1000 accepted at a time',
    timeout_ms: 60000,
    fn: async (t) => {
      const p = await t.startPacerd({
        config: {
          limits: { max_connections: 1000 },
          // The upstream side must not be the bottleneck: a fixed concurrency of 1000.
          plans: { default: { max_concurrent: 1000, concurrency: { adaptive: false }, retry: { max_attempts: 1 } } },
        },
      });
      const N = 5000;
      const portHex = p.port.toString(16).toUpperCase().padStart(4, '0');
      // Connections pacerd has accepted (a socket with an inode, i.e. an open file):
      // sockets still in the kernel's accept queue have inode 0.
      // Counted by inode: /proc/net/tcp is not read atomically and may list a socket twice.
      const accepted = () => {
        const inodes = new Set();
        for (const line of fs.readFileSync('/proc/net/tcp', 'latin1').split('\n')) {
          const f = line.trim().split(/\s+/);
          if (f.length < 10 || !f[1].endsWith(`:${portHex}`) || f[3] === '0A' || f[9] === '0') continue;
          inodes.add(f[9]);
        }
        return inodes.size;
      };
      let peak = 0;
      const sampler = setInterval(() => { try { peak = Math.max(peak, accepted()); } catch { /* ignore */ } }, 50);
      t.defer(() => clearInterval(sampler));
      const payload = 'GET /v1/models HTTP/1.1\r\nHost: x\r\nx-mock-delay-ms: 200\r\nConnection: close\r\n\r\n';
      const t0 = Date.now();
      const one = () => new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port: p.port });
        let buf = Buffer.alloc(0);
        let err = null;
        s.setTimeout(55000, () => s.destroy(new Error('timeout')));
        s.on('connect', () => s.write(payload));
        s.on('data', (d) => { buf = Buffer.concat([buf, d]); });
        s.on('error', (e) => { err = e.code ?? e.message; });
        s.on('close', () => {
          const [r] = parseResponses(buf, true).responses;
          resolve({ status: r?.status ?? null, err });
        });
      });
      const results = await Promise.all(Array.from({ length: N }, one));
      clearInterval(sampler);
      const ms = Date.now() - t0;
      const by = {};
      for (const r of results) { const k = r.status ?? `no answer (${r.err})`; by[k] = (by[k] ?? 0) + 1; }
      t.note(`${N} clients served in ${ms} ms; peak accepted connections ${peak}; outcomes ${JSON.stringify(by)}`);
      assert.equal(by[200], N, `not every client got a 200: ${JSON.stringify(by)}`);
      assert.ok(peak <= 1000, `pacerd held ${peak} client connections at once with limits.max_connections 1000`);
      assert.ok(peak >= 500, `only ${peak} connections at once: the test did not load pacerd`);
      assert.ok(p.alive, 'pacerd exited');
      assert.equal((await request(`${p.url}/v1/models`)).status, 200);
    },
  },

  // ---- limits.client_timeout_s
  {
    name: 'client_timeout_s 1: an idle keep-alive connection is closed silently (EOF, no bytes) after ~1 s',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { limits: { client_timeout_s: 1 } } });
      const c = await open(t, p.port);
      c.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
      const [r] = await c.waitResponses(1, 3000);
      assert.equal(r?.status, 200, c.describe());
      const t0 = Date.now();
      const len = c.buf.length;
      await c.waitClosed(5000, 'an idle keep-alive connection to be closed after client_timeout_s 1');
      const ms = c.closedAt - t0;
      assert.equal(c.buf.length, len, `bytes sent on an idle connection before closing it: ${JSON.stringify(c.buf.subarray(len).toString('latin1').slice(0, 200))}`);
      assert.equal(c.error, null, `closed by ${c.error}, not an EOF`);
      assert.ok(ms >= 500 && ms <= 4000 * SLOW, `idle connection closed after ${ms} ms (client_timeout_s 1: expected 500-4000)`);
      t.note(`closed after ${ms} ms idle`);
    },
  },
  {
    name: 'client_timeout_s 1: a partial request line that stalls gets 408 request_timeout, then close',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { limits: { client_timeout_s: 1 } } });
      const t0 = Date.now();
      const r = await expectRefused(t, p.port, 'GET /v1/mod', 408, 'request_timeout', { what: 'partial request line', timeout_ms: 5000 });
      const ms = Date.now() - t0;
      assert.ok(ms >= 500 && ms <= 4000 * SLOW, `408 after ${ms} ms (client_timeout_s 1: expected 500-4000)`);
      assert.ok(r);
      await nothingForwardedAndStillServes(t, p, 'partial request line');
    },
  },
  {
    name: 'client_timeout_s 1: a partial header block that stalls gets 408 request_timeout, then close',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { limits: { client_timeout_s: 1 } } });
      const c = await open(t, p.port);
      // Part of the header block, a pause shorter than the timeout, more of it, then a
      // stall. Timed from the first byte (a timeout that restarts with every byte would
      // also pass: 300 ms + 1 s is within the tolerance).
      const t0 = Date.now();
      c.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n');
      await sleep(300);
      c.write('X-Partial: ab');
      const [r] = await c.waitResponses(1, 5000, 'an answer to a stalled header block');
      const ms = Date.now() - t0;
      assert.ok(r, `closed without an answer after ${ms} ms; ${c.describe()}`);
      assertOwnAnswer(r, 408, 'request_timeout', 'stalled header block');
      assert.match(r.headers.connection ?? '', /\bclose\b/i, 'the 408 does not say connection: close');
      await c.waitClosed(2000, 'the server to close the connection after the 408');
      assert.ok(ms >= 500 && ms <= 4000 * SLOW, `408 ${ms} ms after the first byte (client_timeout_s 1: expected 500-4000)`);
      await nothingForwardedAndStillServes(t, p, 'stalled header block');
    },
  },
];
