// SPDX-License-Identifier: Apache-2.0
// Load against pacerd-mock's engine mode (tests/mock/README.md, "Engine mode"; issue 29):
// start a mock that batches like vLLM, drive closed-loop streaming clients at it
// (directly or through pacerd, with or without a concurrency cap of the clients'
// own), change the engine mid-run, and compute the figures the issue names:
// throughput, upstream time to first token against the unloaded one, the mean
// queue inside the server, the share of requests preempted.
//
//   const mock = await startEngine(t);                  // or startEngine(null, cfg)
//   const run = await runEngineLoad({ mock, url: mock.url, clients: 128, cap: 28,
//                                     duration_ms: 30000 });
//   const f = figures(run, { from_ms: 10000, to_ms: 30000 });
//   // f.output_tokens_per_s, f.ttft_p50_ms, f.ttft_p50_x, f.mean_waiting, f.preempted_pct …
//
// Every run is bounded (duration_ms, then the requests still open are abandoned);
// only 127.0.0.1 is contacted; the processes are stopped by PID (Mock, Pacerd).
import http from 'node:http';
import { request } from './http.mjs';
import { Mock, Pacerd, toYaml } from './proc.mjs';
import { freePort, makeTmpDir, sleep, waitFor } from './util.mjs';

/** The engine's defaults (mock_engine.c): BLIS's A100 fit of vLLM, ADAPTIVE.md. */
export const ENGINE_DEFAULTS = Object.freeze({
  step_base_ms: 16.44,
  prefill_ms_per_token: 0.0478,
  decode_ms_per_seq: 0.0182,
  step_scale: 1,
  kv_tokens: 33408, // 2,088 blocks of 16: 29 requests of 1,024 + 128 tokens
  max_batch_tokens: 2048,
  max_seqs: 256,
  output_tokens_min: 1,
  output_tokens_max: 256,
  seed: 1,
  window_ms: 10000,
});

/** The prompt the clients send, in the mock's tokens (characters / 4). */
export const PROMPT_TOKENS = 1024;

/** One step's time in ms (the model of mock_engine.h). */
export function stepMs(cfg, prefill_tokens, decoding) {
  const c = { ...ENGINE_DEFAULTS, ...cfg };
  return (c.step_base_ms + c.prefill_ms_per_token * prefill_tokens + c.decode_ms_per_seq * decoding) * c.step_scale;
}

/** Time to first token of a request alone in the engine: one prefill step. */
export const unloadedTtftMs = (cfg = {}, prompt_tokens = PROMPT_TOKENS) => stepMs(cfg, prompt_tokens, 0);

/**
 * A mock in engine mode with `config` (merged over the defaults). With a test
 * context `t`, the mock is the test's (stopped at its end); with null, the caller
 * stops it (`mock.stop()`).
 */
export async function startEngine(t, config = {}) {
  const opts = { args: ['--engine', JSON.stringify(config), '--no-record'] };
  return t ? t.startMock(opts) : Mock.start(opts);
}

export const engineStats = (mock) => mock.admin('GET', '/_mock/engine');
export const engineRequests = (mock) => mock.admin('GET', '/_mock/engine/requests');
/** Changes the fields given (kv_tokens, step_scale, …) now, keeping the others. */
export const configureEngine = (mock, patch) => mock.admin('POST', '/_mock/engine', JSON.stringify(patch));

/** A streamed chat completion of `prompt_tokens` tokens (the mock counts characters / 4). */
export function chatStreamBody({ prompt_tokens = PROMPT_TOKENS, max_tokens, model = 'llama-mock', stream = true } = {}) {
  const b = { model, stream, messages: [{ role: 'user', content: 'x'.repeat(prompt_tokens * 4) }] };
  if (max_tokens !== undefined) b.max_tokens = max_tokens;
  return JSON.stringify(b);
}

/** The pacerd configuration for an engine at `upstream`: `plan` (e.g. {max_concurrent: 28}) or none. */
export function pacerdEngineConfig({ port, upstream, plan, over = {} }) {
  const cfg = {
    listen: `127.0.0.1:${port}`,
    admin: { listen: '' },
    log: { level: 'warn' },
    providers: { openai: { upstream } },
    ...over,
  };
  if (plan) cfg.plans = { default: plan };
  return cfg;
}

/**
 * pacerd in front of `mock` (its openai provider), told `plan` or nothing. With a test
 * context `t`, stopped at the test's end; without, the caller stops it.
 */
export async function startPacerdForEngine(t, mock, { plan, over } = {}) {
  const port = await freePort();
  const config = toYaml(pacerdEngineConfig({ port, upstream: mock.url, plan, over }));
  if (t) return t.startPacerd({ port, config });
  return Pacerd.start({ dir: makeTmpDir(), config, port });
}

/** A counting semaphore: at most `n` holders, the others served in order; resize(n)
 * changes n (holders beyond a smaller n keep what they hold until they release it). */
export class Semaphore {
  constructor(n) { this.total = n; this.free = n; this.queue = []; }
  acquire() {
    if (this.free > 0) { this.free--; return Promise.resolve(); }
    return new Promise((r) => this.queue.push(r));
  }
  release() {
    if (this.free < 0) { this.free++; return; }
    const next = this.queue.shift();
    if (next) next(); else this.free++;
  }
  resize(n) {
    const more = n - this.total;
    this.total = n;
    if (more < 0) this.free += more;
    for (let i = 0; i < more; i++) this.release();
  }
}

/**
 * `clients` closed-loop streaming clients against `url` (each sends its next request as
 * soon as its previous stream ends), at most `cap` of them in flight at once (0: no cap),
 * until `stop()` is called. Returns {stop, done, results, inFlight()}: results[] gets
 * {start, first, end, tokens, status, error} (ms of performance.now()) per request.
 */
export function closedLoop({ url, clients, cap = 0, headers = {}, body = chatStreamBody(), timeout_ms = 120000 }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients, maxFreeSockets: clients });
  const sem = cap > 0 ? new Semaphore(cap) : null;
  const results = [];
  const open = new Set();
  let stopped = false;
  const hdrs = { 'content-type': 'application/json', authorization: 'Bearer sk-engine-load', ...headers, 'content-length': Buffer.byteLength(body) };
  const once = () => new Promise((resolve) => {
    const r = { start: performance.now(), first: null, end: null, tokens: 0, status: 0, error: null };
    let tail = '';
    const finish = (error) => {
      if (r.end !== null) return;
      r.end = performance.now();
      if (error && !r.error) r.error = error;
      clearTimeout(timer);
      open.delete(req);
      results.push(r);
      resolve();
    };
    const req = http.request(`${url}/v1/chat/completions`, { method: 'POST', headers: hdrs, agent }, (res) => {
      r.status = res.statusCode;
      res.setEncoding('utf8');
      res.on('data', (s) => {
        // content chunks; one may be split between two reads, and the 13 characters
        // kept are too few to hold a whole match (14) that was already counted
        const text = tail + s;
        const n = text.split('"content":"tok').length - 1;
        if (n > 0 && r.first === null) r.first = performance.now();
        r.tokens += n;
        tail = text.slice(-13);
      });
      res.on('end', () => finish(res.statusCode === 200 ? null : `status ${res.statusCode}`));
      res.on('error', (e) => finish(e.code ?? e.message));
      res.on('aborted', () => finish('aborted'));
    });
    open.add(req);
    const timer = setTimeout(() => req.destroy(new Error('timeout')), timeout_ms);
    req.on('error', (e) => finish(stopped ? 'stopped' : (e.code ?? e.message)));
    req.end(body);
  });
  const client = async () => {
    while (!stopped) {
      if (sem) await sem.acquire();
      try {
        if (stopped) break;
        await once();
      } finally {
        if (sem) sem.release();
      }
    }
  };
  const done = Promise.all(Array.from({ length: clients }, client)).finally(() => agent.destroy());
  return {
    results,
    done,
    inFlight: () => open.size,
    /** A new cap (the run must have started with one). */
    setCap: (n) => sem.resize(n),
    /** Stops sending; the streams still open are abandoned (the server sees them leave). */
    stop: async () => {
      stopped = true;
      for (const req of open) req.destroy(new Error('stopped'));
      await done;
    },
  };
}

/**
 * One bounded run: `clients` closed-loop clients at `url` (the mock, or a pacerd in
 * front of it) with a cap of `cap` (0: none) for `duration_ms`, the engine sampled every
 * `sample_ms`. `events`: [{at_ms, engine: {…patch}} | {at_ms, tenant: {clients, cap,
 * name}} | {at_ms, cap} | {at_ms, fn: async () => …}]: a change of the engine, another
 * tenant's closed-loop streams straight to the mock (until the run's end), a new cap
 * of the clients' own (a run that started with one), or anything.
 * `onSample()` may return extra figures (pacerd's limit) kept with each sample.
 * Returns {samples, records, results, tenants, t0_mock_ms, duration_ms}; times of
 * samples and records are the mock's ms, t0_mock_ms the run's start on that clock.
 */
export async function runEngineLoad({ mock, url, clients = 128, cap = 0, duration_ms = 30000, sample_ms = 500, events = [], onSample, headers = {}, body }) {
  const start = await engineStats(mock);
  const t0_mock_ms = start.t_ms;
  const t0 = performance.now();
  const samples = [sampleOf(start, t0_mock_ms)];
  const main = closedLoop({ url, clients, cap, headers, body });
  const others = [];
  const timers = events.map((ev) => setTimeout(async () => {
    try {
      if (ev.cap !== undefined) main.setCap(ev.cap);
      if (ev.engine) await configureEngine(mock, ev.engine);
      if (ev.tenant) {
        const { name = 'other', clients: n = 16, cap: c = 0 } = ev.tenant;
        others.push({ name, load: closedLoop({ url: mock.url, clients: n, cap: c, headers: { 'x-mock-tenant': name }, body }) });
      }
      if (ev.fn) await ev.fn();
    } catch (e) {
      samples.push({ error: `event at ${ev.at_ms} ms: ${e.message}` });
    }
  }, ev.at_ms));
  try {
    while (performance.now() - t0 < duration_ms) {
      await sleep(Math.min(sample_ms, Math.max(1, duration_ms - (performance.now() - t0))));
      const s = sampleOf(await engineStats(mock), t0_mock_ms);
      if (onSample) s.extra = await onSample(s);
      samples.push(s);
    }
  } finally {
    timers.forEach(clearTimeout);
    await Promise.all([main.stop(), ...others.map((o) => o.load.stop())]);
  }
  // what was abandoned leaves the engine when the mock sees the connections close
  await waitFor(async () => {
    const s = await engineStats(mock);
    return s.waiting + s.running === 0;
  }, { timeout_ms: 20000, interval_ms: 100, what: 'the engine to empty after the run' });
  const records = await engineRequests(mock);
  return { samples: samples.filter((s) => !s.error), errors: samples.filter((s) => s.error), records, results: main.results, tenants: others.map((o) => ({ name: o.name, results: o.load.results })), t0_mock_ms, duration_ms };
}

function sampleOf(s, t0_mock_ms) {
  return {
    t: s.t_ms - t0_mock_ms,
    t_ms: s.t_ms,
    waiting: s.waiting,
    running: s.running,
    kv_blocks: s.kv_blocks,
    kv_blocks_used: s.kv_blocks_used,
    waiting_area_ms: s.waiting_area_ms,
    running_area_ms: s.running_area_ms,
    output_tokens: s.output_tokens,
    finished: s.finished,
    preemptions: s.preemptions,
    lag_mean_ms: s.step_lag_ms.mean,
    lag_max_ms: s.step_lag_ms.max,
    reanchors: s.step_lag_ms.reanchors,
    tenants: s.tenants,
    config: { kv_tokens: s.config.kv_tokens, step_scale: s.config.step_scale },
  };
}

export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** The sample nearest to `t` (ms since the run's start). */
function at(samples, t) {
  let best = samples[0];
  for (const s of samples) if (Math.abs(s.t - t) < Math.abs(best.t - t)) best = s;
  return best;
}

const tenantOf = (s, name) => s.tenants?.[name] ?? { output_tokens: 0, finished: 0 };

/**
 * The figures of a run between from_ms and to_ms after its start, for one tenant
 * ('' — the clients of runEngineLoad — by default):
 *   output_tokens_per_s, requests_per_s      the tenant's, from the engine's counters
 *   all_output_tokens_per_s                  every tenant's
 *   mean_waiting, mean_running               the engine's queue and batch, time-averaged
 *   ttft_p50_ms, ttft_p99_ms, ttft_n         upstream first token (arrival at the mock to
 *                                            the first token) of the tenant's requests
 *                                            whose first token came in the window
 *   ttft_p50_x, ttft_p99_x                   the same over unloaded_ms (default: one
 *                                            prefill step of the engine's constants)
 *   preempted_pct                            the tenant's requests finished in the window
 *                                            that were preempted at least once, in %
 *   lag_mean_ms                              how late the mock's step timer fired on average
 *                                            over the whole run (the machine's noise)
 */
export function figures(run, { from_ms = 0, to_ms = run.duration_ms, tenant = '', unloaded_ms } = {}) {
  const a = at(run.samples, from_ms);
  const b = at(run.samples, to_ms);
  const span = b.t_ms - a.t_ms;
  const from = run.t0_mock_ms + a.t;
  const to = run.t0_mock_ms + b.t;
  const mine = run.records.filter((r) => r.tenant === tenant);
  const ttft = mine.filter((r) => r.first_token_ms !== null && r.first_token_ms >= from && r.first_token_ms < to)
    .map((r) => r.first_token_ms - r.arrival_ms);
  const ended = mine.filter((r) => r.state === 'finished' && r.end_ms >= from && r.end_ms < to);
  const allTokens = (s) => Object.values(s.tenants ?? {}).reduce((n, x) => n + x.output_tokens, 0);
  const unloaded = unloaded_ms ?? unloadedTtftMs({ step_scale: a.config.step_scale });
  const p50 = percentile(ttft, 50);
  const p99 = percentile(ttft, 99);
  const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
  return {
    window_s: round(span / 1000, 2),
    output_tokens_per_s: round((tenantOf(b, tenant).output_tokens - tenantOf(a, tenant).output_tokens) * 1000 / span),
    requests_per_s: round((tenantOf(b, tenant).finished - tenantOf(a, tenant).finished) * 1000 / span, 2),
    all_output_tokens_per_s: round((allTokens(b) - allTokens(a)) * 1000 / span),
    mean_waiting: round((b.waiting_area_ms - a.waiting_area_ms) / span, 2),
    mean_running: round((b.running_area_ms - a.running_area_ms) / span, 2),
    ttft_n: ttft.length,
    ttft_p50_ms: round(p50),
    ttft_p99_ms: round(p99),
    ttft_p50_x: round(p50 / unloaded, 2),
    ttft_p99_x: round(p99 / unloaded, 2),
    preempted_pct: ended.length ? round((100 * ended.filter((r) => r.preemptions > 0).length) / ended.length, 2) : NaN,
    finished_n: ended.length,
    lag_mean_ms: round(run.samples[run.samples.length - 1].lag_mean_ms, 3),
    client_errors: run.results.filter((r) => r.error && r.error !== 'stopped' && r.error !== 'aborted').length,
  };
}

/**
 * The best of a sweep's rows by the engine's output tokens per second (every tenant's:
 * with another tenant beside, the clients' own share grows with their cap past the
 * knee, taken from the other tenant, while the engine's does not): {cap, figures}.
 */
export function bestCap(rows) {
  const tok = (r) => r.figures.all_output_tokens_per_s;
  return rows.reduce((best, r) => (best === null || tok(r) > tok(best) ? r : best), null);
}

/**
 * A sweep of fixed client-side caps straight at the engine: for each cap a run of
 * warmup_ms + measure_ms (figures over the measured part), the engine reset before
 * each. `engine` is the configuration for the whole sweep; `tenant` another tenant's
 * streams from the start ({clients, cap, name}). Returns rows [{cap, figures}].
 */
export async function sweepCaps({ mock, caps, clients = 128, warmup_ms = 10000, measure_ms = 20000, engine = {}, tenant, onRow }) {
  const rows = [];
  for (const cap of caps) {
    await configureEngine(mock, { ...ENGINE_DEFAULTS, ...engine });
    await mock.reset();
    const run = await runEngineLoad({ mock, url: mock.url, clients, cap, duration_ms: warmup_ms + measure_ms, events: tenant ? [{ at_ms: 0, tenant }] : [] });
    const row = { cap, figures: figures(run, { from_ms: warmup_ms, to_ms: warmup_ms + measure_ms }) };
    rows.push(row);
    if (onRow) onRow(row);
  }
  return rows;
}

/**
 * A shorter sweep: one run straight at the engine whose cap of the clients' own steps
 * through `caps` (ascending), each held for warmup_ms + measure_ms (figures over the
 * measured part; raising a cap needs no drain). `engine` is the configuration for the
 * sweep, `tenant` another tenant's streams from the start. Returns rows [{cap, figures}].
 */
export async function sweepStepwise({ mock, caps, clients = 128, warmup_ms, measure_ms, engine = {}, tenant }) {
  await configureEngine(mock, { ...ENGINE_DEFAULTS, ...engine });
  await mock.reset();
  const step = warmup_ms + measure_ms;
  const events = caps.slice(1).map((cap, i) => ({ at_ms: (i + 1) * step, cap }));
  if (tenant) events.unshift({ at_ms: 0, tenant });
  const run = await runEngineLoad({ mock, url: mock.url, clients, cap: caps[0], duration_ms: caps.length * step, events });
  return caps.map((cap, i) => ({ cap, figures: figures(run, { from_ms: i * step + warmup_ms, to_ms: (i + 1) * step }) }));
}

/** Upstream first-token time of `n` requests sent one at a time (the engine otherwise idle). */
export async function measureUnloadedTtft(mock, { n = 3, prompt_tokens = PROMPT_TOKENS } = {}) {
  await mock.reset();
  for (let i = 0; i < n; i++) {
    const r = await request(`${mock.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-output-tokens': '2' },
      body: chatStreamBody({ prompt_tokens }),
      timeout_ms: 10000,
    });
    if (r.status !== 200) throw new Error(`unloaded request: status ${r.status}`);
  }
  const recs = (await engineRequests(mock)).filter((r) => r.first_token_ms !== null);
  return percentile(recs.map((r) => r.first_token_ms - r.arrival_ms), 50);
}
