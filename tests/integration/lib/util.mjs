// SPDX-License-Identifier: Apache-2.0
// Constants and small helpers: binaries, timing factor, waits, ports, certificates.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const PACERD_BIN = path.resolve(ROOT, process.env.PACERD_BIN ?? 'build/pacerd');
export const MOCK_BIN = path.resolve(ROOT, process.env.MOCK_BIN ?? 'build/pacerd-mock');
export const VALGRIND = process.env.PACERD_WRAPPER === 'valgrind';
/** Factor for every timing tolerance (valgrind makes pacerd 10-50x slower). */
export const SLOW = VALGRIND ? 10 : 1;
// -q: only errors on stderr, so that tests reading pacerd's own stderr see it unchanged.
export const VALGRIND_ARGS = [
  '-q', '--leak-check=full', '--show-leak-kinds=definite,indirect',
  '--errors-for-leak-kinds=definite,indirect', '--error-exitcode=99', '--track-fds=no',
];

/**
 * Upstream 429s an exact bucket may count that are not pacerd's gates' doing: under
 * valgrind the time from a dispatch decision to its bytes on the wire varies by
 * milliseconds, which a bucket with no tolerance sees as two requests too close.
 * The gates are the same code; `make test` holds them to 0.
 */
export const EXACT_BUCKET_429S = VALGRIND ? 3 : 0;

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

const handedOut = new Set();

/** Whether a listener can bind 127.0.0.1:port right now. */
function bindable(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A port that was free a moment ago, for a process of the test to listen on. Below
 * the kernel's ephemeral range (32768 and up by default), not "bind 0": a port the
 * kernel picked for us is one it may pick next for an outgoing connection (the
 * client's, or pacerd's own to the mock) before pacerd binds it ("Address already in
 * use" in a fresh container, once in a make test). Never the same one twice in a run.
 */
// run.mjs --jobs gives each of its concurrent processes its own part of that range
// (ITEST_PORTS=first-last), so that two never hand out the same port.
const [portLo, portHi] = (process.env.ITEST_PORTS ?? '20000-31999').split('-').map(Number);

export async function freePort() {
  for (let i = 0; i < 200; i++) {
    const port = portLo + Math.floor(Math.random() * (portHi - portLo + 1));
    if (handedOut.has(port)) continue;
    if (await bindable(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('no free port below the ephemeral range');
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

export function tail(text, lines = 25) {
  const l = text.split('\n');
  return l.slice(-lines).map((s) => `    | ${s}`).join('\n');
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
