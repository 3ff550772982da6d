// SPDX-License-Identifier: Apache-2.0
// HTTP clients: node:http, raw sockets, curl; and the check of pacerd's own error answers.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { SLOW } from './util.mjs';

class Response {
  constructor(status, statusText, headers, rawHeaders, body, ms) {
    Object.assign(this, { status, statusText, headers, rawHeaders, body, ms });
  }
  text() { return this.body.toString('utf8'); }
  json() {
    try { return JSON.parse(this.text()); } catch { throw new Error(`not JSON (status ${this.status}): ${this.text().slice(0, 300)}`); }
  }
}

/**
 * One HTTP/1.1 request with node:http on a fresh connection. url: a full URL.
 * Resolves with a Response; rejects on network errors and after timeout_ms.
 */
export function request(url, { method = 'GET', headers = {}, body, timeout_ms = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        resolve(new Response(res.statusCode, res.statusMessage, res.headers, res.rawHeaders, Buffer.concat(chunks), Date.now() - t0));
      });
      res.on('error', (e) => { clearTimeout(timer); reject(e); });
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`${method} ${url}: no complete response within ${timeout_ms} ms`));
    }, timeout_ms * SLOW);
    req.on('error', (e) => { clearTimeout(timer); reject(new Error(`${method} ${url}: ${e.message}`)); });
    if (body !== undefined) req.end(body); else req.end();
  });
}

/**
 * Streams a response: onChunk(buf, ms_since_start, res) for every read; returns
 * {status, headers, res, req, done} where done resolves with the whole body.
 */
export function streamRequest(url, { method = 'POST', headers = {}, body, timeout_ms = 20000, onChunk } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now(); // ms with their fraction: first-byte figures are a few ms
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      const chunks = [];
      const done = new Promise((res2, rej2) => {
        res.on('data', (c) => { chunks.push(c); onChunk?.(c, performance.now() - t0, res); });
        res.on('end', () => { clearTimeout(timer); res2(Buffer.concat(chunks)); });
        res.on('error', (e) => { clearTimeout(timer); rej2(e); });
        res.on('aborted', () => { clearTimeout(timer); rej2(new Error('response aborted')); });
      });
      done.catch(() => {});
      resolve({ status: res.statusCode, headers: res.headers, res, req, done });
    });
    const timer = setTimeout(() => req.destroy(new Error(`no complete response within ${timeout_ms * SLOW} ms`)), timeout_ms * SLOW);
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
    if (body !== undefined) req.end(body); else req.end();
  });
}

/**
 * Sends raw bytes on a new TCP connection and reads one HTTP response (by
 * content-length, chunked framing, or until the peer closes; with untilClose, every
 * byte until the peer closes, parsed as far as the first response). Never throws on
 * socket errors: they are reported in `error`.
 */
export function rawHttp(port, payload, { timeout_ms = 5000, untilClose = false } = {}) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    const chunks = [];
    let finished = false;
    let error = null;
    const finish = (why) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      s.destroy();
      const raw = Buffer.concat(chunks);
      resolve({ ...parseHttp(raw), raw, error, why });
    };
    const timer = setTimeout(() => finish('timeout'), timeout_ms * SLOW);
    s.on('connect', () => s.write(payload));
    s.on('data', (d) => {
      chunks.push(d);
      const p = parseHttp(Buffer.concat(chunks));
      if (p.complete && !untilClose) finish('complete');
    });
    s.on('error', (e) => { error = e.code ?? e.message; });
    s.on('close', () => finish('closed'));
  });
}

/** Parses one HTTP/1.x response from raw bytes: {status, reason, headers, body, complete}. */
export function parseHttp(raw) {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return { status: null, headers: {}, body: Buffer.alloc(0), complete: false };
  const head = raw.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(head[0]);
  const headers = {};
  for (const line of head.slice(1)) {
    const i = line.indexOf(':');
    if (i < 0) continue;
    const k = line.slice(0, i).trim().toLowerCase();
    const v = line.slice(i + 1).trim();
    headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
  }
  let rest = raw.subarray(end + 4);
  const status = m ? Number(m[1]) : null;
  if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    return { status, reason: m?.[2], headers, body: rest.subarray(0, n), complete: rest.length >= n };
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts = [];
    for (let i = 0; i < 100000; i++) {
      const le = rest.indexOf('\r\n');
      if (le < 0) break;
      const size = parseInt(rest.subarray(0, le).toString('latin1'), 16);
      if (Number.isNaN(size)) break;
      if (size === 0) return { status, reason: m?.[2], headers, body: Buffer.concat(parts), complete: true };
      if (rest.length < le + 2 + size + 2) break;
      parts.push(rest.subarray(le + 2, le + 2 + size));
      rest = rest.subarray(le + 2 + size + 2);
    }
    return { status, reason: m?.[2], headers, body: Buffer.concat(parts), complete: false };
  }
  // No framing: HEAD-less error answers (status with no body) or read until close.
  const noBody = status === 204 || status === 304 || (status >= 100 && status < 200);
  return { status, reason: m?.[2], headers, body: rest, complete: noBody };
}

/**
 * Runs curl (no shell). Returns {exit, status, headers, body, time_ms, stderr}.
 * headers: lower-cased names of the LAST response's headers.
 */
export function curl(args, { dir, timeout_ms = 15000 } = {}) {
  const id = crypto.randomBytes(6).toString('hex');
  const hfile = path.join(dir, `curl-${id}.h`);
  const bfile = path.join(dir, `curl-${id}.b`);
  const full = ['-sS', '--max-time', String(Math.ceil((timeout_ms * SLOW) / 1000)), '-D', hfile, '-o', bfile,
    '-w', '%{http_code} %{time_total}', ...args];
  return new Promise((resolve) => {
    execFile('curl', full, { timeout: timeout_ms * SLOW + 5000, encoding: 'utf8' }, (err, stdout, stderr) => {
      const [code, secs] = stdout.trim().split(' ');
      const read = (f) => { try { return fs.readFileSync(f); } catch { return Buffer.alloc(0); } };
      const hraw = read(hfile).toString('latin1');
      fs.rmSync(hfile, { force: true });
      const body = read(bfile);
      fs.rmSync(bfile, { force: true });
      // -D holds every response (proxy CONNECT answer, 100-continue, ...): keep the last.
      const blocks = hraw.split(/\r\n\r\n/).filter((b) => b.startsWith('HTTP/'));
      const last = parseHttp(Buffer.from(`${blocks.at(-1) ?? ''}\r\n\r\n`, 'latin1'));
      resolve({
        exit: err ? (typeof err.code === 'number' ? err.code : -1) : 0,
        status: Number(code) || 0,
        headers: last.headers,
        allHeaderBlocks: blocks,
        body,
        time_ms: Math.round(Number(secs) * 1000),
        stderr,
      });
    });
  });
}

// ---------------------------------------------------------------- assertions

/** Asserts a pacerd-made error: status and {"error":{"message","type":"pacer_error","code"}}. */
export function assertPacerError(r, status, code) {
  const body = typeof r.text === 'function' ? r.text() : r.body.toString('utf8');
  if (r.status !== status) throw new Error(`expected status ${status} (${code}), got ${r.status}: ${body.slice(0, 300)}`);
  let j;
  try { j = JSON.parse(body); } catch { throw new Error(`expected a JSON error body for ${status}, got: ${body.slice(0, 300)}`); }
  const e = j?.error;
  if (!e || e.type !== 'pacer_error' || e.code !== code || typeof e.message !== 'string' || e.message.length === 0)
    throw new Error(`expected {"error":{"message":…,"type":"pacer_error","code":"${code}"}}, got ${body.slice(0, 300)}`);
  const ct = r.headers['content-type'] ?? '';
  if (!/^application\/json/i.test(ct)) throw new Error(`content-type of the error is '${ct}', expected application/json`);
  return e;
}
