// SPDX-License-Identifier: Apache-2.0
// Processes the suite starts (the mock, pacerd): output captured, exit awaited,
// stopped by PID only; pacerd's configuration.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { request } from './http.mjs';
import { MOCK_BIN, PACERD_BIN, SLOW, VALGRIND, VALGRIND_ARGS, tail, tryConnect, waitFor } from './util.mjs';

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

function readFirstLine(proc, timeout_ms) {
  return waitFor(() => {
    if (!proc.alive) throw new Error(`${proc.name} exited (${JSON.stringify(proc.exit)}): ${proc.stderr.slice(-500)}`);
    const i = proc.stdout.indexOf('\n');
    return i >= 0 ? proc.stdout.slice(0, i) : null;
  }, { timeout_ms, interval_ms: 10, what: `${proc.name} to print its ports` });
}

// ---------------------------------------------------------------- the mock upstream

export class Mock {
  static async start({ certs = null, config = null, args: extra = [] } = {}) {
    const args = ['--port', '0', ...extra];
    if (certs) args.push('--tls-port', '0', '--cert', certs.cert, '--key', certs.key);
    if (config) args.push('--config', JSON.stringify(config));
    const m = new Mock();
    m.proc = new Proc('pacerd-mock', MOCK_BIN, args);
    // The mock stands for a provider, whose arrival instants are taken by its own
    // machines: here it shares two cores with pacerd, Redis and the load generator, and
    // a mock not scheduled for a few ms records a request that late (a 100 ms gap read
    // as 96: a refusal from a bucket of one that no sender caused). Scheduled first, it
    // records arrivals within ~0.2 ms of the send. Only root may raise a priority; others
    // keep the default and see that jitter.
    try { os.setPriority(m.proc.child.pid, -10); } catch { /* not root */ }
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
    // The state directory (the CA for CONNECT tunnels, lanes.state) is one of its
    // own in the test's directory, never in $HOME: what one pacerd learned is not
    // taken up by the next one a test starts, unless the test gives the same
    // STATE_DIRECTORY to both (restart.mjs).
    p.stateDir = env.STATE_DIRECTORY ?? fs.mkdtempSync(path.join(dir, 'state-'));
    p.proc = new Proc('pacerd', cmd, argv, { env: { ...process.env, ...env, STATE_DIRECTORY: p.stateDir } });
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
