// SPDX-License-Identifier: Apache-2.0
// A real redis-server for the shared-store tests (cases/store.mjs): started on a free
// loopback port with a temporary directory of its own and no persistence, tracked
// by PID (lib/proc.mjs Proc), stopped at the end of the test that started it. And a
// tiny RESP2 client over node:net (one connection per command; no npm package).
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Proc } from './proc.mjs';
import { freePort, tail, waitFor } from './util.mjs';

export const REDIS_BIN = process.env.REDIS_BIN ?? '/usr/bin/redis-server';

/** Commands a "no scripts" server renames away (Redis 7: EVAL*, SCRIPT, and the FUNCTION/FCALL family). */
export const SCRIPT_COMMANDS = ['EVAL', 'EVALSHA', 'EVAL_RO', 'EVALSHA_RO', 'SCRIPT', 'FUNCTION', 'FCALL', 'FCALL_RO'];

/** An error reply (`-ERR …`) of the server. */
export class RedisError extends Error {}

// ---------------------------------------------------------------- RESP

/** Encodes one command as a RESP array of bulk strings. */
export function respEncode(args) {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a), 'utf8');
    parts.push(`$${b.length}\r\n`, b, '\r\n');
  }
  return Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p, 'utf8'))));
}

/**
 * Parses one RESP2 (and the common RESP3) value at buf[pos]: {value, pos} with pos
 * after it, or null when buf does not hold it entirely yet. Simple strings and bulk
 * strings are JS strings (utf8), integers numbers, nulls null, arrays arrays, error
 * replies RedisError instances (not thrown here).
 */
export function respParse(buf, pos = 0) {
  if (pos >= buf.length) return null;
  const le = buf.indexOf('\r\n', pos);
  if (le < 0) return null;
  const type = String.fromCharCode(buf[pos]);
  const line = buf.toString('utf8', pos + 1, le);
  const after = le + 2;
  switch (type) {
    case '+': return { value: line, pos: after };
    case '-': return { value: new RedisError(line), pos: after };
    case ':': return { value: Number(line), pos: after };
    case ',': return { value: Number(line), pos: after };
    case '#': return { value: line === 't', pos: after };
    case '_': return { value: null, pos: after };
    case '$': case '=': case '!': {
      const n = Number(line);
      if (n < 0) return { value: null, pos: after };
      if (buf.length < after + n + 2) return null;
      const s = buf.toString('utf8', after, after + n);
      return { value: type === '!' ? new RedisError(s) : s, pos: after + n + 2 };
    }
    case '*': case '~': case '>': case '%': {
      let n = Number(line);
      if (n < 0) return { value: null, pos: after };
      if (type === '%') n *= 2;
      const out = [];
      let p = after;
      for (let i = 0; i < n; i++) {
        const r = respParse(buf, p);
        if (!r) return null;
        out.push(r.value);
        p = r.pos;
      }
      if (type === '%') {
        const o = {};
        for (let i = 0; i < out.length; i += 2) o[out[i]] = out[i + 1];
        return { value: o, pos: p };
      }
      return { value: out, pos: p };
    }
    default:
      throw new Error(`RESP: unexpected type byte ${JSON.stringify(type)} at ${pos}: ${JSON.stringify(buf.toString('latin1', pos, pos + 40))}`);
  }
}

/**
 * Sends one command to 127.0.0.1:port on a fresh connection and resolves with the
 * parsed reply; rejects with a RedisError for an error reply, with an Error on
 * network errors or after timeout_ms.
 */
export function redisCommand(port, args, { timeout_ms = 3000 } = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (err, v) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      if (err) reject(err); else resolve(v);
    };
    const timer = setTimeout(() => finish(new Error(`redis ${args[0]}: no reply within ${timeout_ms} ms`)), timeout_ms);
    s.on('connect', () => s.write(respEncode(args)));
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      let r;
      try { r = respParse(buf, 0); } catch (e) { finish(e); return; }
      if (!r) return;
      if (r.value instanceof RedisError) finish(r.value);
      else finish(null, r.value);
    });
    s.on('error', (e) => finish(new Error(`redis ${args[0]} on 127.0.0.1:${port}: ${e.code ?? e.message}`)));
    s.on('close', () => finish(new Error(`redis ${args[0]} on 127.0.0.1:${port}: connection closed before a reply`)));
  });
}

// ---------------------------------------------------------------- the server

export class Redis {
  /**
   * Starts redis-server on a free loopback port (or `port`), in a fresh temporary
   * directory, without persistence, and waits until it answers PING.
   * noScripts: the script commands (SCRIPT_COMMANDS) are renamed away, so that EVAL,
   * EVALSHA, SCRIPT LOAD, FUNCTION, FCALL answer "ERR unknown command".
   */
  static async start({ port, noScripts = false, args = [] } = {}) {
    const r = new Redis();
    r.port = port ?? await freePort();
    r.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pacerd-itest-redis-'));
    r.noScripts = noScripts;
    r.args = [
      '--port', String(r.port), '--bind', '127.0.0.1', '--protected-mode', 'yes',
      '--save', '', '--appendonly', 'no', '--dir', r.dir, '--daemonize', 'no',
      '--logfile', '', '--databases', '1',
      ...(noScripts ? SCRIPT_COMMANDS.flatMap((c) => ['--rename-command', c, '']) : []),
      ...args,
    ];
    r.address = `127.0.0.1:${r.port}`;
    r.url = `redis://127.0.0.1:${r.port}`;
    r.generations = [];
    await r.#spawn();
    return r;
  }

  async #spawn() {
    this.proc = new Proc('redis-server', REDIS_BIN, this.args);
    this.pid = this.proc.pid;
    this.generations.push(this.proc);
    try {
      await waitFor(async () => {
        if (!this.proc.alive) throw new Error(`redis-server exited during start-up: ${JSON.stringify(this.proc.exit)}\n${tail(this.proc.stdout + this.proc.stderr)}`);
        return (await redisCommand(this.port, ['PING'], { timeout_ms: 500 })) === 'PONG';
      }, { timeout_ms: 10000, interval_ms: 20, what: `redis-server to answer PING on ${this.port}` });
    } catch (e) {
      if (this.proc.alive) { this.proc.signal('SIGKILL'); await this.proc.waitExit(5000); }
      throw e;
    }
  }

  get alive() { return this.proc.alive; }

  /** The server's own log (stdout) of every generation so far. */
  log() { return this.generations.map((p) => p.stdout + p.stderr).join('\n--- restart ---\n'); }

  /** SIGTERM and wait (SIGKILL after 5 s is a failure, as for every Proc). */
  async stop() {
    if (!this.proc.alive) return this.proc.exit;
    return this.proc.stop(5000);
  }

  /** SIGKILL and wait for the exit: the server vanishes without a goodbye. */
  async kill() {
    if (!this.proc.alive) return this.proc.exit;
    this.proc.signal('SIGKILL');
    const r = await this.proc.waitExit(5000);
    if (!r) throw new Error(`redis-server (pid ${this.pid}) still running 5 s after SIGKILL`);
    return r;
  }

  /** A new server on the same port (and directory; empty: nothing persisted) once the old one is gone. */
  async restart() {
    if (this.proc.alive) await this.stop();
    await this.#spawn();
  }

  /** One command, e.g. command('SET', 'k', 'v'); the parsed reply (error replies reject). */
  command(...args) { return redisCommand(this.port, args); }

  /** KEYS pattern, sorted. */
  async keys(pattern = '*') { return (await this.command('KEYS', pattern)).sort(); }

  /** Stops the server (if running) and removes its directory. */
  async cleanup() {
    try {
      await this.stop();
    } finally {
      fs.rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

/** A redis-server of this test only: stopped (and its directory removed) when the test ends. */
export async function startRedis(t, opts = {}) {
  const r = await Redis.start(opts);
  t.defer(() => r.cleanup());
  return r;
}
