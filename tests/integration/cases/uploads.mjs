// SPDX-License-Identifier: Apache-2.0
// Uploads stream through (issue 28 item 6): the body of a files, uploads or batches
// request goes upstream as it arrives, never read whole first: byte-identical at the
// mock whatever its size, pacerd's memory bounded by a buffer (VmHWM), Content-Length
// and chunked, Expect: 100-continue answered when the body is wanted; a client that
// leaves mid-upload aborts the transfer (no request completed upstream, no fd left);
// an upstream that answers before the body is read is relayed; an upload is resent
// only while pacerd still holds its first byte; limits.max_upload_bytes is its cap,
// and a body pacerd must parse keeps limits.max_body_bytes.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { SLOW, VALGRIND, parseHttp, rawHttp, request, sleep, waitFor } from '../lib.mjs';

const MiB = 1024 * 1024;
const auth = { authorization: 'Bearer sk-upload-0001' };

// The 32 MiB default of max_body_bytes, not the suite's 16 MiB: the cap under test.
export const config = { limits: { max_body_bytes: 32 * MiB } };

const fdCount = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;
const hwmKiB = (pid) => Number(/^VmHWM:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

// One MiB of pseudo-random bytes, the filler of every generated body.
const BLOCK = (() => {
  const b = Buffer.alloc(MiB);
  let x = 0x9e3779b9;
  for (let i = 0; i < b.length; i += 4) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b.writeUInt32LE(x, i);
  }
  return b;
})();

/**
 * The parts of a multipart/form-data body of `size` bytes of file content, as
 * OpenAI's POST /v1/files takes it: {boundary, head, tail, length}.
 */
function multipart(size) {
  const boundary = '----pacerd-upload-test-7f3a';
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n` +
    'Content-Type: application/octet-stream\r\n\r\n');
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return { boundary, head, tail, length: head.length + size + tail.length };
}

/** Resolves when w drains or closes. */
function drained(w) {
  return new Promise((r) => {
    const done = () => { w.off('drain', done); w.off('close', done); r(); };
    w.on('drain', done);
    w.on('close', done);
  });
}

/**
 * Writes head, size bytes of BLOCK (in pieces of `piece`, pause_ms apart), tail to a
 * writable that returns false when full (node:http's request, a socket), waiting for
 * 'drain': resolves with the SHA-256 of everything written.
 */
async function writeBody(w, { head = Buffer.alloc(0), size, tail = Buffer.alloc(0), piece = 256 * 1024, stopAfter = Infinity, pause_ms = 0 }) {
  const hash = crypto.createHash('sha256');
  const put = async (buf) => {
    if (w.destroyed) return; // answered and closed early: the rest is not sent
    hash.update(buf);
    if (!w.write(buf)) await drained(w);
  };
  await put(head);
  for (let sent = 0; sent < size && sent < stopAfter && !w.destroyed; ) {
    const n = Math.min(piece, size - sent);
    const off = sent % MiB;
    await put(n <= MiB - off ? BLOCK.subarray(off, off + n) : Buffer.concat([BLOCK.subarray(off), BLOCK.subarray(0, n - (MiB - off))]));
    sent += n;
    if (pause_ms > 0) await sleep(pause_ms);
  }
  if (stopAfter === Infinity) await put(tail);
  return hash.digest('hex');
}

/**
 * POST with a body written piece by piece (Content-Length given in headers, else
 * chunked). Resolves with {status, headers, body, sha}: sha of what was sent.
 */
function upload(url, { headers = {}, write, timeout_ms = 60000 }) {
  return new Promise((resolve, reject) => {
    let sha = null;
    const req = http.request(url, { method: 'POST', headers: { ...auth, ...headers }, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => { clearTimeout(timer); resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks), sha }); });
      res.on('error', (e) => { clearTimeout(timer); reject(e); });
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeout_ms * SLOW} ms`)), timeout_ms * SLOW);
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
    write(req).then((h) => { sha = h; req.end(); }, reject);
  });
}

/**
 * An upstream of the test's own (node:http): `answer(req, res, info)` per request,
 * where info.bytes / info.sha are filled as the body arrives and info.done resolves at
 * its end (or with false when the connection closed first). seen: every request's info.
 */
async function startUpstream(t, answer) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    const hash = crypto.createHash('sha256');
    const info = { method: req.method, url: req.url, headers: req.headers, bytes: 0, complete: false };
    info.done = new Promise((resolve) => {
      req.on('data', (c) => { info.bytes += c.length; hash.update(c); });
      req.on('end', () => { info.complete = true; info.sha = hash.digest('hex'); resolve(true); });
      req.socket.on('close', () => resolve(info.complete)); // a request answered early may never end
    });
    seen.push(info);
    answer(req, res, info, seen.length);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  t.defer(() => new Promise((r) => { srv.closeAllConnections?.(); srv.close(() => r()); }));
  return { url: `http://127.0.0.1:${srv.address().port}`, seen };
}

/** A JSON answer with content-length. */
function reply(res, status, obj, extra = {}) {
  const b = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b), ...extra });
  res.end(b);
}

/** The request line pacerd logged for x-request-id id. */
async function requestLine(p, id) {
  return waitFor(() => p.logs().find((l) => l.event === 'request' && l.request_id === id), { timeout_ms: 5000 * SLOW, what: `the request line of ${id}` });
}

export const tests = [
  {
    name: 'a 100 MiB multipart upload to /v1/files reaches the mock byte-identical, in one attempt; pacerd\'s VmHWM grows < 16 MiB',
    timeout_ms: 90000,
    fn: async (t) => {
      const p = await t.pacerd();
      const size = (VALGRIND ? 16 : 100) * MiB;
      const mp = multipart(size);
      const headers = { 'content-type': `multipart/form-data; boundary=${mp.boundary}`, 'content-length': String(mp.length), 'x-request-id': 'upload-big' };
      // Warm-up: the pools and buffers an upload uses exist before the measurement.
      const small = multipart(MiB);
      const w = await upload(`${p.url}/v1/files`, { headers: { ...headers, 'content-length': String(small.length), 'x-request-id': 'upload-warm' }, write: (req) => writeBody(req, { ...small, size: MiB }) });
      assert.equal(w.status, 200, w.body.toString());
      await t.mock.reset();
      const before = hwmKiB(p.pid);
      const t0 = Date.now();
      const r = await upload(`${p.url}/v1/files`, { headers, write: (req) => writeBody(req, { ...mp, size }) });
      const ms = Date.now() - t0;
      const after = hwmKiB(p.pid);
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(JSON.parse(r.body).bytes, mp.length);
      assert.equal(r.headers['x-pacer-attempts'], '1');
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.uri, '/v1/files');
      assert.equal(rec.body_len, mp.length);
      assert.equal(rec.body_sha256, r.sha, 'the mock hashed other bytes than the client sent');
      const cl = rec.headers.find(([k]) => k.toLowerCase() === 'content-length');
      assert.equal(cl?.[1], String(mp.length), 'the client\'s Content-Length goes upstream');
      const line = await requestLine(p, 'upload-big');
      assert.equal(line.upload_bytes, mp.length);
      t.note(`${(mp.length / MiB).toFixed(1)} MiB in ${ms} ms; VmHWM ${before} -> ${after} KiB`);
      if (!VALGRIND) assert.ok(after - before < 16 * 1024, `VmHWM grew ${after - before} KiB during a ${size / MiB} MiB upload`);
    },
  },
  {
    name: 'a chunked upload (pieces of 1 B to 200 KiB) reaches the mock byte-identical, sent chunked upstream',
    timeout_ms: 30000,
    fn: async (t) => {
      const p = await t.pacerd();
      const size = 8 * MiB + 12345;
      const r = await upload(`${p.url}/v1/files`, {
        headers: { 'content-type': 'application/octet-stream', 'x-request-id': 'upload-chunked' },
        write: async (req) => {
          const hash = crypto.createHash('sha256');
          let sent = 0, i = 0;
          while (sent < size) {
            const n = Math.min([1, 7, 4096, 200 * 1024, 65536][i++ % 5], size - sent);
            const buf = Buffer.from(BLOCK.subarray(sent % (MiB - n), sent % (MiB - n) + n));
            hash.update(buf);
            if (!req.write(buf)) await drained(req);
            sent += n;
          }
          return hash.digest('hex');
        },
      });
      assert.equal(r.status, 200, r.body.toString());
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_len, size);
      assert.equal(rec.body_sha256, r.sha);
      const te = rec.headers.find(([k]) => k.toLowerCase() === 'transfer-encoding');
      assert.equal(te?.[1], 'chunked');
      assert.equal((await requestLine(p, 'upload-chunked')).upload_bytes, size);
    },
  },
  {
    name: 'an upload to an HTTPS upstream (the mock\'s TLS port) streams byte-identical',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.pacerd();
      const size = 5 * MiB + 3;
      const r = await upload(`${p.url}/secure/v1/files`, { headers: { 'content-length': String(size) }, write: (req) => writeBody(req, { size }) });
      assert.equal(r.status, 200, r.body.toString());
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_len, size);
      assert.equal(rec.body_sha256, r.sha);
    },
  },
  {
    name: 'Expect: 100-continue on an upload: the 100 comes, then the body, then the answer; the body is byte-identical',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.pacerd();
      const body = BLOCK.subarray(0, 3 * 65536 + 17);
      const got = await new Promise((resolve, reject) => {
        const s = net.connect({ host: '127.0.0.1', port: p.port });
        let buf = Buffer.alloc(0), sentBody = false;
        const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer: ${buf.toString('latin1').slice(0, 200)}`)); }, 10000 * SLOW);
        s.on('connect', () => s.write(`POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-upload-0001\r\n` +
          `Content-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`));
        s.on('data', (d) => {
          buf = Buffer.concat([buf, d]);
          const text = buf.toString('latin1');
          if (!sentBody && text.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
            sentBody = true;
            s.write(body);
          }
          const final = text.indexOf('HTTP/1.1 2');
          if (final >= 0 && /\r\n\r\n\{.*\}/s.test(text.slice(final))) { clearTimeout(timer); s.destroy(); resolve({ text, sentBody }); }
        });
        s.on('error', reject);
      });
      assert.ok(got.sentBody, `no 100 Continue before the answer: ${got.text.slice(0, 200)}`);
      assert.match(got.text, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_sha256, crypto.createHash('sha256').update(body).digest('hex'));
    },
  },
  {
    name: 'a client that leaves mid-upload: the transfer is aborted (the mock completes no request), 499 logged, no fd left open',
    timeout_ms: 30000,
    fn: async (t) => {
      const p = await t.pacerd();
      // Warm: the connection pools exist before the count.
      assert.equal((await request(`${p.url}/v1/models`, { headers: auth })).status, 200);
      await sleep(100);
      const fds = fdCount(p.pid);
      const s = net.connect({ host: '127.0.0.1', port: p.port });
      await new Promise((r) => s.once('connect', r));
      s.on('error', () => {});
      s.write(`POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-upload-0001\r\nx-request-id: upload-gone\r\n` +
        `Content-Type: application/octet-stream\r\nContent-Length: ${64 * MiB}\r\n\r\n`);
      await writeBody(s, { size: 64 * MiB, stopAfter: 8 * MiB });
      // The transfer runs (the lane let it go) before the client leaves.
      await waitFor(() => p.logs().some((l) => l.event === 'acquired' && l.request_id === 'upload-gone'), { timeout_ms: 5000 * SLOW, what: 'the upload to be dispatched' });
      await sleep(200);
      s.destroy();
      const line = await requestLine(p, 'upload-gone');
      assert.equal(line.status, 499);
      assert.ok(line.upload_bytes >= 4 * MiB && line.upload_bytes < 64 * MiB, `upload_bytes ${line.upload_bytes}`);
      await sleep(300);
      assert.deepEqual((await t.mock.requests()).filter((q) => q.uri === '/v1/files'), [], 'the mock completed a request whose client left');
      await waitFor(() => fdCount(p.pid) <= fds, { timeout_ms: 3000 * SLOW, what: `fds back to ${fds} (now ${fdCount(p.pid)})` });
      // And the next upload goes through.
      const r = await upload(`${p.url}/v1/files`, { headers: { 'content-length': String(MiB) }, write: (req) => writeBody(req, { size: MiB }) });
      assert.equal(r.status, 200);
    },
  },
  {
    name: 'an upstream that answers 401 before reading the body: relayed; a client that writes its whole 32 MiB body before it reads still gets the answer (pacerd takes the rest, then closes); the upstream got only a part',
    timeout_ms: 30000,
    fn: async (t) => {
      const up = await startUpstream(t, (req, res) => reply(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } }));
      const p = await t.startPacerd({ config: { providers: { early: { upstream: up.url, prefix: '/early' } } } });
      const size = 32 * MiB;
      // A client that reads nothing until its body is written (as Python's
      // requests does: it goes on sending after pacerd's FIN), then reads the
      // answer from what arrived meanwhile and closes; slowly, over 3 s: longer
      // than the 2 s lingering close of an answer before an ordinary body.
      const got = await new Promise((resolve, reject) => {
        const s = net.connect({ host: '127.0.0.1', port: p.port, allowHalfOpen: true });
        const chunks = [];
        let wrote = false, error = null;
        const timer = setTimeout(() => { s.destroy(); reject(new Error('no end within 20 s')); }, 20000 * SLOW);
        s.on('data', (d) => chunks.push(d));
        s.on('error', (e) => { error = e.code ?? e.message; });
        s.on('close', () => { clearTimeout(timer); resolve({ raw: Buffer.concat(chunks), wrote, error }); });
        s.on('connect', async () => {
          s.write(`POST /early/v1/files HTTP/1.1\r\nHost: x\r\nx-request-id: upload-401\r\nContent-Length: ${size}\r\n\r\n`);
          await writeBody(s, { size, piece: MiB, pause_ms: 100 });
          wrote = !s.destroyed;
          s.end();
        });
      });
      const r = parseHttp(got.raw);
      assert.ok(got.wrote, `the client could not write its whole body (${got.error})`);
      assert.equal(r.status, 401, got.raw.toString('latin1').slice(0, 300));
      assert.ok(r.complete, 'the answer was cut');
      assert.equal(JSON.parse(r.body).error.code, 'invalid_api_key');
      assert.equal(r.headers.connection, 'close', 'an answer before the body ends closes the connection');
      assert.equal(up.seen.length, 1, 'a 401 is never retried');
      await up.seen[0].done;
      assert.ok(up.seen[0].bytes < size, `the upstream read all ${up.seen[0].bytes} bytes`);
      assert.equal((await requestLine(p, 'upload-401')).status, 401);
      t.note(`the upstream read ${(up.seen[0].bytes / MiB).toFixed(1)} MiB of ${size / MiB} before its answer ended the transfer`);
    },
  },
  {
    name: 'retries: a small upload (held whole) refused with 503 is sent again, byte-identical; a large one whose first bytes went is not (one attempt, the 503 relayed)',
    timeout_ms: 30000,
    fn: async (t) => {
      const up = await startUpstream(t, async (req, res, info, n) => {
        await info.done;
        // The first request of each size is refused after its body was read.
        const first = up.seen.filter((s) => s.headers['content-length'] === req.headers['content-length']).length === 1;
        if (first) reply(res, 503, { error: { message: 'overloaded', type: 'server_error', code: 'server_is_overloaded' } }, { 'retry-after': '0' });
        else reply(res, 200, { object: 'file', bytes: info.bytes, sha256: info.sha });
      });
      const p = await t.startPacerd({
        config: {
          providers: { early: { upstream: up.url, prefix: '/early' } },
          plans: { default: { retry: { initial_delay_ms: 50, max_delay_ms: 100 } } },
        },
      });
      const smallSize = 100 * 1024;
      const s = await upload(`${p.url}/early/v1/files`, { headers: { 'content-length': String(smallSize) }, write: (req) => writeBody(req, { size: smallSize }) });
      assert.equal(s.status, 200, s.body.toString());
      assert.equal(s.headers['x-pacer-attempts'], '2');
      assert.equal(up.seen.length, 2);
      assert.equal(up.seen[1].sha, s.sha, 'the resent upload differs from the client\'s');
      assert.equal(JSON.parse(s.body).sha256, s.sha);

      const bigSize = 4 * MiB;
      const b = await upload(`${p.url}/early/v1/files`, { headers: { 'content-length': String(bigSize), 'x-request-id': 'upload-503' }, write: (req) => writeBody(req, { size: bigSize }) });
      assert.equal(b.status, 503, b.body.toString());
      assert.equal(b.headers['x-pacer-attempts'], '1');
      assert.equal(b.headers['x-should-retry'], undefined, 'the client still has its body: its SDK may retry');
      assert.equal(up.seen.length, 3, 'an upload whose first bytes are gone was sent again');
      assert.equal((await requestLine(p, 'upload-503')).retry_stop, 'body_gone');
    },
  },
  {
    name: 'limits: a chat completion over max_body_bytes (32 MiB) is still 413, announced or chunked; an upload of that size passes; one over max_upload_bytes is 413, announced or chunked (the mock completes nothing)',
    timeout_ms: 60000,
    fn: async (t) => {
      const p = await t.pacerd();
      const over = 32 * MiB + 1;
      // Announced: answered before the body is read.
      const a = await rawHttp(p.port, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${over}\r\n\r\n`);
      assert.equal(a.status, 413);
      assert.equal(JSON.parse(a.body).error.code, 'body_too_large');
      // Chunked: answered as it grows past (the client may see its write cut).
      const c = await upload(`${p.url}/v1/chat/completions`, { headers: { 'content-type': 'application/json' }, write: (req) => writeBody(req, { size: over }) }).catch((e) => ({ error: e }));
      if (c.error === undefined) assert.equal(c.status, 413);
      // An upload of the same size streams.
      const u = await upload(`${p.url}/v1/files`, { headers: { 'content-length': String(over) }, write: (req) => writeBody(req, { size: over }) });
      assert.equal(u.status, 200);
      assert.equal((await t.mock.requests()).filter((r) => r.uri === '/v1/chat/completions').length, 0);
      await t.mock.reset();

      const q = await t.startPacerd({ config: { limits: { max_upload_bytes: 4 * MiB } } });
      const a2 = await rawHttp(q.port, `POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: ${4 * MiB + 1}\r\n\r\n`);
      assert.equal(a2.status, 413);
      assert.match(JSON.parse(a2.body).error.message, /max_upload_bytes/);
      const c2 = await upload(`${q.url}/v1/files`, { headers: { 'x-request-id': 'upload-over' }, write: (req) => writeBody(req, { size: 6 * MiB }) }).catch((e) => ({ error: e }));
      if (c2.error === undefined) {
        assert.equal(c2.status, 413);
        assert.match(JSON.parse(c2.body).error.message, /max_upload_bytes/);
      }
      const line = await requestLine(q, 'upload-over');
      assert.equal(line.status, 413);
      await sleep(200);
      assert.deepEqual(await t.mock.requests(), [], 'an upload over its cap completed a request upstream');
      const ok = await upload(`${q.url}/v1/files`, { headers: { 'content-length': String(4 * MiB) }, write: (req) => writeBody(req, { size: 4 * MiB }) });
      assert.equal(ok.status, 200);
    },
  },
  {
    name: 'timeouts: an upstream that stops taking the upload is cut after timeouts.idle_s (504, not resent); a client that stops sending is answered 408 after client_timeout_s; neither completes a request upstream',
    timeout_ms: 30000,
    fn: async (t) => {
      const up = await startUpstream(t, (req) => req.pause()); // takes nothing more, answers nothing
      const p = await t.startPacerd({
        config: {
          limits: { client_timeout_s: 1 },
          providers: { stuck: { upstream: up.url, prefix: '/stuck', timeouts: { idle_s: 1 } } },
        },
      });
      const t0 = Date.now();
      const r = await upload(`${p.url}/stuck/v1/files`, { headers: { 'content-length': String(64 * MiB), 'x-request-id': 'upload-stuck' }, write: (req) => writeBody(req, { size: 64 * MiB }) });
      assert.equal(r.status, 504, r.body.toString());
      assert.equal(JSON.parse(r.body).error.code, 'upstream_timeout');
      const ms = Date.now() - t0;
      assert.ok(ms >= 900 && ms < 6000 * SLOW, `answered after ${ms} ms`);
      assert.equal(up.seen.length, 1, 'resent');
      assert.equal(up.seen[0].complete, false);
      const line = await requestLine(p, 'upload-stuck');
      assert.match(line.upstream_detail, /upload within timeouts\.idle_s/);

      // A client that stops sending: 408 once client_timeout_s passed.
      await t.mock.reset();
      const q = await t.startPacerd({ config: { limits: { client_timeout_s: 1 } } });
      const got = await new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port: q.port });
        const chunks = [];
        s.on('connect', () => s.write(`POST /v1/files HTTP/1.1\r\nHost: x\r\nx-request-id: upload-stall\r\nContent-Length: ${MiB}\r\n\r\n` + 'x'.repeat(1000)));
        s.on('data', (d) => chunks.push(d));
        s.on('error', () => {});
        s.on('close', () => resolve(parseHttp(Buffer.concat(chunks))));
        setTimeout(() => s.destroy(), 8000 * SLOW);
      });
      assert.equal(got.status, 408);
      assert.equal(JSON.parse(got.body).error.code, 'request_timeout');
      assert.equal((await requestLine(q, 'upload-stall')).status, 408);
      await sleep(200);
      assert.deepEqual(await t.mock.requests(), [], 'a stalled upload completed a request upstream');
    },
  },
  {
    name: 'keep-alive: an upload, then a chat completion on the same connection',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.pacerd();
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      t.defer(() => agent.destroy());
      const one = (path, headers, body) => new Promise((resolve, reject) => {
        const req = http.request(`${p.url}${path}`, { method: 'POST', agent, headers: { ...auth, ...headers } }, (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode, reused: req.reusedSocket, body: Buffer.concat(chunks) }));
        });
        req.on('error', reject);
        req.end(body);
      });
      const u = await one('/v1/files', { 'content-type': 'application/octet-stream' }, BLOCK.subarray(0, 512 * 1024));
      assert.equal(u.status, 200);
      const c = await one('/v1/chat/completions', { 'content-type': 'application/json' }, JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }] }));
      assert.equal(c.status, 200);
      assert.ok(c.reused, 'the connection was not kept after the upload');
    },
  },
];
