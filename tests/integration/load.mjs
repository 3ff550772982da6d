// SPDX-License-Identifier: Apache-2.0
// Load generation and reporting for the scheduler scenarios (cases/sched_*.mjs).
// Bounded everywhere: a run stops at `n` requests or at `deadline_ms`, whichever
// comes first; every request has its own timeout; only 127.0.0.1 is contacted.
import http from 'node:http';
import { SLOW, freePort, keyHash, merge, sleep, tryConnect, waitFor } from './lib.mjs';

/**
 * YAML for pacerd, like lib.toYaml but also able to write lists of mappings
 * (`keys: [{provider: openai, key_sha256: …, plan: …}]`), which lib.toYaml cannot
 * (it would print "[object Object]").
 */
export function toYaml(obj, indent = '') {
  let out = '';
  for (const [k, v] of Object.entries(obj)) {
    if (v === undefined) continue;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) out += `${indent}${k}:\n${toYaml(v, indent + '  ')}`;
    else out += `${indent}${k}: ${flow(v)}\n`;
  }
  return out;
}
function flow(v) {
  if (Array.isArray(v)) return `[${v.map(flow).join(', ')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${k}: ${flow(x)}`).join(', ')}}`;
  if (typeof v === 'string') return JSON.stringify(v);
  return String(v);
}

/**
 * A pacerd of this test whose openai provider points at `mock` (a mock of the test's
 * own, so that its /_mock/config never leaks into other files), with `over` merged
 * into the suite's base configuration; `env`: more of pacerd's environment.
 */
export async function startPacerdFor(t, mock, over = {}, { env } = {}) {
  const port = await freePort();
  const cfg = merge(t.baseConfig(port, { providers: { openai: { upstream: mock.url } } }), over);
  return t.startPacerd({ port, config: toYaml(cfg), ...(env ? { env } : {}) });
}

/** ASAN_OPTIONS without the quarantine, for a test that reads pacerd's RSS: under
 * AddressSanitizer (make test SAN=1) freed memory waits there and counts as growth
 * (inert without ASan). */
export const asanNoQuarantine = () => ({
  ASAN_OPTIONS: [process.env.ASAN_OPTIONS, 'quarantine_size_mb=0', 'thread_local_quarantine_size_kb=0'].filter(Boolean).join(':'),
});

/**
 * startPacerdFor with an admin port (over.admin merged in): resolves once the
 * admin port answers, with `p.admin` its base URL.
 */
export async function startPacerdWithAdmin(t, mock, over = {}, opts = {}) {
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, merge(over, { admin: { listen: `127.0.0.1:${aport}` } }), opts);
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  p.admin = `http://127.0.0.1:${aport}`;
  return p;
}

/** `{provider: openai, key_sha256, plan}` for a key. */
export const keyEntry = (key, plan) => ({ provider: 'openai', key_sha256: keyHash(key), plan });

export function chatBody({ max_tokens, stream = false, content = 'Say hello to the scheduler test.' } = {}) {
  const b = { model: 'gpt-mock', messages: [{ role: 'user', content }] };
  if (max_tokens !== undefined) b.max_tokens = max_tokens;
  if (stream) b.stream = true;
  return JSON.stringify(b);
}

/**
 * One request on `agent` (a keep-alive http.Agent, or false). Never rejects:
 * network errors and timeouts come back as {status: 0, error}.
 * Times are ms since `t0` (the run's start).
 */
export function send(url, { method = 'POST', headers = {}, body, agent = false, timeout_ms = 30000, t0 = Date.now(), signal, timeoutError, localAddress } = {}) {
  return new Promise((resolve) => {
    const start = Date.now() - t0;
    let done = false;
    const finish = (r) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ start, end: Date.now() - t0, ...r });
    };
    const hdrs = { ...headers };
    if (body !== undefined) hdrs['content-length'] = Buffer.byteLength(body);
    const req = http.request(url, { method, headers: hdrs, agent, signal, localAddress }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => finish({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (e) => finish({ status: 0, error: e.code ?? e.message }));
      res.on('aborted', () => finish({ status: 0, error: 'response aborted' }));
    });
    const timer = setTimeout(() => req.destroy(new Error(timeoutError ?? `timeout after ${timeout_ms * SLOW} ms`)), timeout_ms * SLOW);
    req.on('error', (e) => finish({ status: 0, error: e.message === timeoutError ? e.message : (e.code ?? e.message) }));
    req.end(body);
  });
}

/**
 * Sends `n` requests from `concurrency` clients (a keep-alive agent with maxSockets =
 * concurrency), each client sending its next request as soon as its previous one is
 * answered. makeRequest(i) returns {path, headers, body, method}. Stops at n requests
 * or at deadline_ms after the start (then `unsent` counts what was never sent).
 * Returns {results, wall_ms, unsent} with results[i] = {i, start, end, status, headers, body, error}.
 */
export async function runLoad({ base, n, concurrency, makeRequest, deadline_ms = 30000, timeout_ms = 30000, t0 = Date.now() }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  const results = new Array(n);
  let next = 0;
  const end = t0 + deadline_ms * SLOW;
  const worker = async () => {
    for (let k = 0; k < n; k++) {
      if (next >= n || Date.now() >= end) return;
      const i = next++;
      const { path, headers = {}, body, method = 'POST' } = makeRequest(i);
      const left = Math.max(1, end - Date.now());
      const timeoutError = left < timeout_ms * SLOW ? 'unanswered at the run\'s deadline' : undefined;
      results[i] = { i, ...(await send(`${base}${path}`, { method, headers, body, agent, timeout_ms: Math.min(left, timeout_ms * SLOW) / SLOW, t0, timeoutError })) };
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    agent.destroy();
  }
  const sent = results.filter(Boolean);
  const wall_ms = sent.length ? Math.max(...sent.map((r) => r.end)) - Math.min(...sent.map((r) => r.start)) : 0;
  return { results: sent, wall_ms, unsent: n - sent.length };
}

export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
export const median = (v) => percentile(v, 50);

/** Summary of a load run: counts of statuses, client errors, queue-ms percentiles. */
export function summarize(run) {
  const ok = run.results.filter((r) => r.status >= 200 && r.status < 300);
  const bad = run.results.filter((r) => !(r.status >= 200 && r.status < 300));
  const statuses = {};
  for (const r of run.results) statuses[r.status || r.error] = (statuses[r.status || r.error] ?? 0) + 1;
  if (run.unsent) statuses['never sent (run deadline)'] = run.unsent;
  const queueMs = run.results.map((r) => Number(r.headers?.['x-pacer-queue-ms'])).filter((x) => Number.isFinite(x));
  const attempts = run.results.map((r) => Number(r.headers?.['x-pacer-attempts'])).filter((x) => Number.isFinite(x));
  return {
    ok: ok.length,
    client_errors: bad.length + run.unsent,
    statuses,
    p99_queue_ms: queueMs.length ? percentile(queueMs, 99) : NaN,
    max_attempts: attempts.length ? Math.max(...attempts) : NaN,
    retried: attempts.filter((a) => a > 1).length,
    completed: ok.length + bad.filter((r) => r.status > 0).length,
    unfinished: run.results.filter((r) => r.status === 0).length + run.unsent,
    firstErrors: bad.slice(0, 3).map((r) => `#${r.i} status=${r.status} ${r.error ?? ''} ${(r.body ?? '').slice(0, 200)}`),
  };
}

/**
 * Prints the scenario line the engineer builds a table from:
 * `# scenario X: goodput=…% of the mock's limit, upstream_429=N (M%), client_errors=N, p99_queue_ms=N, wall=…s`
 * goodput = successful requests per second ÷ limit_rps; upstream_429's % is of the
 * requests the clients sent.
 */
export function scenarioLine(id, { sum, wall_ms, limit_rps, upstream429, sent }) {
  const goodput = (sum.ok / (wall_ms / 1000)) / limit_rps * 100;
  const pct = sent ? (upstream429 / sent) * 100 : 0;
  const line = `# scenario ${id}: goodput=${goodput.toFixed(1)}% of the mock's limit, upstream_429=${upstream429} (${pct.toFixed(1)}%), ` +
    `client_errors=${sum.client_errors}, p99_queue_ms=${sum.p99_queue_ms}, wall=${(wall_ms / 1000).toFixed(2)}s`;
  console.log(line);
  return line;
}

/** Pacerd JSON log lines of one event name. */
export const events = (p, name) => p.logs().filter((l) => l.event === name || l.msg === name || l.ev === name);

/** Compact digest of pacerd's scheduler log lines, for failure messages. */
export function logDigest(p, names = ['retry', 'limit_learned', 'concurrency_changed'], max = 12) {
  const out = [];
  for (const name of names) {
    const ls = events(p, name);
    out.push(`${name}: ${ls.length} line(s)`);
    for (const l of ls.slice(0, max)) out.push(`  ${JSON.stringify(l).slice(0, 300)}`);
  }
  return out.join('\n');
}

export { sleep };
