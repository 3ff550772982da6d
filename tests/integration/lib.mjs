// Helpers of the integration suite: processes (mock, pacerd), ports, HTTP clients
// (node:http, raw sockets, curl), test certificates. Everything talks to 127.0.0.1
// only; every wait is bounded in time; processes are stopped by PID.
import { spawn, execFile, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PACERD_BIN = path.resolve(ROOT, process.env.PACERD_BIN ?? 'build/pacerd');
export const MOCK_BIN = path.resolve(ROOT, process.env.MOCK_BIN ?? 'build/pacerd-mock');
export const VALGRIND = process.env.PACERD_WRAPPER === 'valgrind';
/** Factor for every timing tolerance (valgrind makes pacerd 10-50x slower). */
export const SLOW = VALGRIND ? 10 : 1;
const VALGRIND_ARGS = [
  '--leak-check=full', '--show-leak-kinds=definite,indirect',
  '--errors-for-leak-kinds=definite,indirect', '--error-exitcode=99', '--track-fds=no',
];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');
export const keyHash = (key) => sha256(key).slice(0, 12);

/** Polls fn() until it returns a truthy value; bounded by timeout_ms. */
export async function waitFor(fn, { timeout_ms = 2000, interval_ms = 25, what = 'condition' } = {}) {
  const end = Date.now() + timeout_ms;
  let last;
  for (let i = 0; i < 100000; i++) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= end) break;
    await sleep(interval_ms);
  }
  const detail = last instanceof Error ? ` (last error: ${last.message})` : ` (last value: ${JSON.stringify(last)})`;
  throw new Error(`timed out after ${timeout_ms} ms waiting for ${what}${detail}`);
}

/** A port that was free a moment ago (bind 0, then close). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** 'open' | 'refused' | 'timeout' | other error code, for a TCP connect to 127.0.0.1:port. */
export function tryConnect(port, timeout_ms = 500) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    const done = (v) => { clearTimeout(t); s.destroy(); resolve(v); };
    const t = setTimeout(() => done('timeout'), timeout_ms);
    s.once('connect', () => done('open'));
    s.once('error', (e) => done(e.code === 'ECONNREFUSED' ? 'refused' : e.code ?? e.message));
  });
}

// ---------------------------------------------------------------- processes

const live = new Set();
process.on('exit', () => {
  for (const p of live) {
    try { process.kill(p.pid, 'SIGKILL'); } catch { /* already gone */ }
  }
});

/** A child process we started: output captured, exit awaited, stopped by PID only. */
export class Proc {
  constructor(name, cmd, args, opts = {}) {
    this.name = name;
    this.stdout = '';
    this.stderr = '';
    this.exit = null; // {code, signal} once exited
    this.child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env, cwd: opts.cwd });
    this.pid = this.child.pid;
    live.add(this);
    this.child.stdout.setEncoding('utf8');
    this.child.stderr.setEncoding('utf8');
    this.child.stdout.on('data', (d) => { if (this.stdout.length < 4e6) this.stdout += d; });
    this.child.stderr.on('data', (d) => { if (this.stderr.length < 16e6) this.stderr += d; });
    this.exited = new Promise((resolve) => {
      this.child.once('error', (e) => {
        this.stderr += `\n[spawn error: ${e.message}]`;
        if (!this.exit) { this.exit = { code: 127, signal: null }; live.delete(this); resolve(this.exit); }
      });
      // 'close' waits for stdio to be drained, so stderr is complete afterwards.
      this.child.once('close', (code, signal) => {
        if (!this.exit) this.exit = { code, signal };
        live.delete(this);
        resolve(this.exit);
      });
    });
  }

  get alive() { return this.exit === null; }

  signal(sig) {
    if (this.exit === null && this.pid) process.kill(this.pid, sig);
  }

  /** Waits for exit at most timeout_ms; null when still running. */
  async waitExit(timeout_ms) {
    let t;
    const timer = new Promise((r) => { t = setTimeout(() => r(null), timeout_ms); });
    const v = await Promise.race([this.exited, timer]);
    clearTimeout(t);
    return v;
  }

  /** SIGTERM, wait; SIGKILL after timeout_ms and throw (a hang at exit is a failure). */
  async stop(timeout_ms = 5000) {
    if (this.exit) return this.exit;
    const t0 = Date.now();
    this.signal('SIGTERM');
    const r = await this.waitExit(timeout_ms);
    if (r) return { ...r, ms: Date.now() - t0 };
    this.signal('SIGKILL');
    await this.waitExit(5000);
    throw new Error(`${this.name} (pid ${this.pid}) did not exit within ${timeout_ms} ms of SIGTERM; killed with SIGKILL` +
      `\n${tail(this.stderr)}`);
  }
}

export function tail(text, lines = 25) {
  const l = text.split('\n');
  return l.slice(-lines).map((s) => `    | ${s}`).join('\n');
}

function readFirstLine(proc, timeout_ms) {
  return waitFor(() => {
    if (!proc.alive) throw new Error(`${proc.name} exited (${JSON.stringify(proc.exit)}): ${proc.stderr.slice(-500)}`);
    const i = proc.stdout.indexOf('\n');
    return i >= 0 ? proc.stdout.slice(0, i) : null;
  }, { timeout_ms, interval_ms: 10, what: `${proc.name} to print its ports` });
}

// ---------------------------------------------------------------- the mock upstream

export class Mock {
  static async start({ certs = null, config = null } = {}) {
    const args = ['--port', '0'];
    if (certs) args.push('--tls-port', '0', '--cert', certs.cert, '--key', certs.key);
    if (config) args.push('--config', JSON.stringify(config));
    const m = new Mock();
    m.proc = new Proc('pacerd-mock', MOCK_BIN, args);
    try {
      const line = await readFirstLine(m.proc, 10000);
      const ports = JSON.parse(line);
      m.http = ports.http;
      m.https = ports.https;
    } catch (e) {
      m.proc.signal('SIGKILL');
      throw e;
    }
    m.url = `http://127.0.0.1:${m.http}`;
    return m;
  }

  async admin(method, p, body) {
    const r = await request(`${this.url}${p}`, { method, body, timeout_ms: 5000 });
    if (r.status !== 200) throw new Error(`mock ${method} ${p}: ${r.status} ${r.text()}`);
    return r.json();
  }

  stats() { return this.admin('GET', '/_mock/stats'); }
  requests() { return this.admin('GET', '/_mock/requests'); }
  reset() { return this.admin('POST', '/_mock/reset', ''); }
  configure(cfg) { return this.admin('POST', '/_mock/config', JSON.stringify(cfg)); }

  /** The single request the mock recorded since the last reset (asserts there is exactly one). */
  async onlyRequest() {
    const rs = await this.requests();
    if (rs.length !== 1) throw new Error(`mock recorded ${rs.length} requests, expected 1: ${JSON.stringify(rs).slice(0, 600)}`);
    return rs[0];
  }

  async stop() {
    const r = await this.proc.stop(5000);
    if (r.code !== 0) throw new Error(`mock exited with ${JSON.stringify(r)}: ${this.proc.stderr.slice(-500)}`);
    return r;
  }
}

/** Header value(s) of a recorded request, by case-insensitive name. */
export function recHeaders(rec, name) {
  const n = name.toLowerCase();
  return rec.headers.filter(([k]) => k.toLowerCase() === n).map(([, v]) => v);
}
export const recHeader = (rec, name) => recHeaders(rec, name)[0];

// ---------------------------------------------------------------- pacerd

/** Minimal YAML emitter (block mappings, flow lists of scalars, JSON-quoted strings). */
export function toYaml(obj, indent = '') {
  let out = '';
  for (const [k, v] of Object.entries(obj)) {
    if (v === undefined) continue;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      out += `${indent}${k}:\n${toYaml(v, indent + '  ')}`;
    } else {
      out += `${indent}${k}: ${scalar(v)}\n`;
    }
  }
  return out;
}
function scalar(v) {
  if (Array.isArray(v)) return `[${v.map(scalar).join(', ')}]`;
  if (typeof v === 'string') return JSON.stringify(v);
  return String(v);
}

/** Deep merge; a null in `over` deletes the key. */
export function merge(base, over) {
  if (!over) return structuredClone(base);
  const out = structuredClone(base);
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else if (typeof v === 'object' && !Array.isArray(v) && typeof out[k] === 'object' && out[k] !== null && !Array.isArray(out[k]))
      out[k] = merge(out[k], v);
    else out[k] = structuredClone(v);
  }
  return out;
}

/** The configuration the suite runs pacerd with (DESIGN §10 keys). */
export function baseConfig({ port, mock, certs }) {
  return {
    listen: `127.0.0.1:${port}`,
    admin: { listen: '' },
    log: { level: 'debug' },
    limits: { max_body_bytes: 16777216 },
    providers: {
      openai: { upstream: mock.url, hosts: ['api.openai.com'] },
      anthropic: { upstream: mock.url, hosts: ['api.anthropic.com'] },
      securemock: { upstream: `https://localhost:${mock.https}`, prefix: '/secure', tls: { ca_file: certs.ca } },
    },
  };
}

/** argv for running pacerd, through valgrind when PACERD_WRAPPER=valgrind. */
export function pacerdCommand(args) {
  if (VALGRIND) return ['valgrind', [...VALGRIND_ARGS, PACERD_BIN, ...args]];
  return [PACERD_BIN, args];
}

/** Runs pacerd to completion (for --check-config and refused starts). */
export async function runPacerd(args, { env = {}, timeout_ms = 10000 } = {}) {
  const [cmd, argv] = pacerdCommand(args);
  const p = new Proc('pacerd', cmd, argv, { env: { ...process.env, ...env } });
  let r = await p.waitExit(timeout_ms * SLOW);
  if (!r) {
    p.signal('SIGKILL');
    await p.waitExit(5000);
    throw new Error(`pacerd ${args.join(' ')} still running after ${timeout_ms * SLOW} ms; killed\n${tail(p.stderr)}`);
  }
  checkValgrind(r.code, p.stderr);
  return { code: r.code, signal: r.signal, stdout: p.stdout, stderr: p.stderr };
}

export function checkValgrind(code, stderr) {
  if (VALGRIND && code === 99) throw new Error(`valgrind reported errors (exit 99)\n${tail(stderr, 60)}`);
}

let configSeq = 0;

export class Pacerd {
  /**
   * Starts pacerd with `config` (an object, written as YAML, or a YAML string) in dir,
   * and waits until its listen port accepts TCP.
   */
  static async start({ dir, config, port, env = {}, args = [] }) {
    const file = path.join(dir, `pacerd-${++configSeq}.yaml`);
    fs.writeFileSync(file, typeof config === 'string' ? config : toYaml(config));
    const p = new Pacerd();
    p.port = port;
    p.url = `http://127.0.0.1:${port}`;
    p.configFile = file;
    const [cmd, argv] = pacerdCommand(['-c', file, ...args]);
    p.proc = new Proc('pacerd', cmd, argv, { env: { ...process.env, ...env } });
    p.pid = p.proc.pid;
    const limit = VALGRIND ? 60000 : 10000;
    try {
      await waitFor(async () => {
        if (!p.proc.alive) throw new Error(`pacerd exited during start-up: ${JSON.stringify(p.proc.exit)}\n${tail(p.proc.stderr)}`);
        return (await tryConnect(port, 300)) === 'open';
      }, { timeout_ms: limit, interval_ms: 20, what: `pacerd to listen on ${port}` });
    } catch (e) {
      if (p.proc.alive) { p.proc.signal('SIGKILL'); await p.proc.waitExit(5000); }
      throw new Error(`${e.message}\n${tail(p.proc.stderr)}`);
    }
    return p;
  }

  get alive() { return this.proc.alive; }
  stderr() { return this.proc.stderr; }

  /** Sends a signal; a pacerd a test signalled itself may have exited before stop(). */
  signal(sig) {
    this.signalled = true;
    this.proc.signal(sig);
  }

  /** The JSON log lines (valgrind's own lines and anything else skipped). */
  logs() {
    const out = [];
    for (const line of this.proc.stderr.split('\n')) {
      if (!line.startsWith('{')) continue;
      try { out.push(JSON.parse(line)); } catch { /* partial line */ }
    }
    return out;
  }

  /** VmRSS in KiB, from /proc/<pid>/status. */
  rssKiB() {
    const s = fs.readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(s);
    if (!m) throw new Error('no VmRSS in /proc status');
    return Number(m[1]);
  }

  /**
   * SIGTERM and wait for the exit. Throws when it had to be killed, when valgrind
   * reported errors, or (expectCode given) when the exit code differs.
   */
  async stop({ timeout_ms = 5000, expectCode = 0 } = {}) {
    if (this.stopped) return this.stopped;
    const wasAlive = this.proc.alive;
    const r = await this.proc.stop(timeout_ms * SLOW);
    this.stopped = r;
    checkValgrind(r.code, this.proc.stderr);
    if (!wasAlive && !this.signalled) throw new Error(`pacerd had already exited before SIGTERM: ${JSON.stringify(r)}\n${tail(this.proc.stderr)}`);
    if (expectCode !== null && r.code !== expectCode)
      throw new Error(`pacerd exited with ${JSON.stringify(r)} after SIGTERM, expected code ${expectCode}\n${tail(this.proc.stderr)}`);
    return r;
  }
}

// ---------------------------------------------------------------- HTTP clients

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
    const t0 = Date.now();
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      const chunks = [];
      const done = new Promise((res2, rej2) => {
        res.on('data', (c) => { chunks.push(c); onChunk?.(c, Date.now() - t0, res); });
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

// ---------------------------------------------------------------- certificates

/** A test CA and a server certificate for localhost / 127.0.0.1 (openssl CLI). */
export function makeCerts(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const f = (n) => path.join(dir, n);
  const ossl = (...a) => execFileSync('openssl', a, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ossl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=pacerd itest CA');
  fs.writeFileSync(f('ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' +
    'keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n');
  ossl('req', '-new', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost');
  ossl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial',
    '-out', f('server.pem'), '-days', '2', '-extfile', f('ext.cnf'));
  return { dir, ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key') };
}

export function makeTmpDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'pacerd-itest-'));
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
