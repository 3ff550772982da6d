// SPDX-License-Identifier: Apache-2.0
// The self-hosted engine, measured (issue 29): 128 closed-loop streaming clients against
// pacerd-mock's engine mode (a vLLM-like server that batches continuously, queues and
// preempts, and never refuses), straight at it with a fixed client-side cap, through
// pacerd with max_concurrent fixed, and through pacerd told nothing.
//
//   node scripts/engine-sweep.mjs [--cases steady,kv-half,slow,tenant] [--caps 8,16,…]
//        [--warmup S] [--measure S] [--change-at S] [--timed S] [--json FILE]
//
// after `make build/pacerd build/pacerd-mock` (PACERD_BIN, MOCK_BIN as for the suite).
// Cases (each: a sweep of caps in the engine's state after the change, to find the
// best fixed cap for it; pacerd with max_concurrent at that cap; pacerd told nothing):
//   steady    the engine's defaults (mock_engine.c; ~29 requests fit its KV cache)
//   kv-half   the KV cache halved; the timed run halves it at --change-at
//   slow      every step 2× slower; the timed run slows it at --change-at
//   tenant    another tenant's 16 streams straight at the engine; the timed run starts
//             them at --change-at
// A timed run (pacerd told nothing, --timed s) reports the window before the change and
// the one from 10 s after it to the end. Every run is bounded; everything on 127.0.0.1;
// processes stopped by PID. Figures: tests/integration/lib/engine.mjs, figures().
import fs from 'node:fs';
import {
  ENGINE_DEFAULTS, bestCap, configureEngine, figures, measureUnloadedTtft, runEngineLoad,
  startEngine, startPacerdForEngine, sweepCaps, unloadedTtftMs,
} from '../tests/integration/lib/engine.mjs';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
};
const CASES = opt('cases', 'steady,kv-half,slow,tenant').split(',');
const CAPS = opt('caps', '8,16,24,28,32,48,64').split(',').map(Number);
const WARMUP = Number(opt('warmup', 10)) * 1000;
const MEASURE = Number(opt('measure', 20)) * 1000;
const CHANGE_AT = Number(opt('change-at', 20)) * 1000;
const TIMED = Number(opt('timed', 60)) * 1000;
const JSON_OUT = opt('json', null);
const CLIENTS = 128;
const TENANT = { name: 'other', clients: 16 };

const cases = {
  steady: { engine: {}, note: 'defaults' },
  'kv-half': { engine: { kv_tokens: ENGINE_DEFAULTS.kv_tokens / 2 }, change: { engine: { kv_tokens: ENGINE_DEFAULTS.kv_tokens / 2 } }, extraCaps: [10, 12, 14] },
  slow: { engine: { step_scale: 2 }, change: { engine: { step_scale: 2 } } },
  tenant: { engine: {}, tenant: TENANT, change: { tenant: TENANT }, extraCaps: [10, 12, 14] },
};

const out = { started: new Date().toISOString(), clients: CLIENTS, warmup_ms: WARMUP, measure_ms: MEASURE, cases: {} };
const pad = (s, n) => String(s).padEnd(n);
const num = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '-');

function header() {
  console.log(`| ${pad('run', 34)} | out tok/s | req/s | % best | TTFT p50 ms (×) | TTFT p99 ms (×) | queue | batch | preempted % | lag ms |`);
  console.log(`|${'-'.repeat(36)}|----------:|------:|-------:|----------------:|----------------:|------:|------:|------------:|-------:|`);
}
// out tok/s: the clients' (and, with another tenant, the engine's: all); % best: the
// engine's against the best fixed cap's
function row(label, f, best) {
  const tok = f.output_tokens_per_s;
  const all = f.all_output_tokens_per_s !== tok ? ` (all ${num(f.all_output_tokens_per_s)})` : '';
  console.log(`| ${pad(label, 34)} | ${pad(num(tok) + all, 9)} | ${num(f.requests_per_s, 2)} | ${best ? num((100 * f.all_output_tokens_per_s) / best, 0) : '-'} | ` +
    `${num(f.ttft_p50_ms)} (${num(f.ttft_p50_x, 1)}) | ${num(f.ttft_p99_ms)} (${num(f.ttft_p99_x, 1)}) | ${num(f.mean_waiting, 1)} | ` +
    `${num(f.mean_running, 1)} | ${num(f.preempted_pct, 1)} | ${num(f.lag_mean_ms, 2)} |`);
}

async function viaPacerd(mock, c, plan, { duration_ms, events = [] }) {
  await configureEngine(mock, { ...ENGINE_DEFAULTS, ...(events.length ? {} : c.engine) });
  await mock.reset();
  const p = await startPacerdForEngine(null, mock, { plan });
  try {
    const startTenant = c.tenant && !events.length ? [{ at_ms: 0, tenant: c.tenant }] : [];
    return await runEngineLoad({ mock, url: p.url, clients: CLIENTS, duration_ms, events: [...startTenant, ...events] });
  } finally {
    await p.stop();
  }
}

const mock = await startEngine(null, {});
try {
  const unloaded = await measureUnloadedTtft(mock);
  out.unloaded_ttft_ms = unloaded;
  console.log(`engine: ${JSON.stringify(ENGINE_DEFAULTS)}`);
  console.log(`unloaded upstream first token: measured ${unloaded.toFixed(1)} ms, model ${unloadedTtftMs().toFixed(1)} ms; ` +
    `${CLIENTS} closed-loop streaming clients, 1,024 prompt tokens, outputs uniform in 1..256; ` +
    `figures over ${MEASURE / 1000} s after ${WARMUP / 1000} s of warm-up`);
  for (const name of CASES) {
    const c = cases[name];
    if (!c) throw new Error(`unknown case ${name}`);
    const res = { rows: [] };
    out.cases[name] = res;
    console.log(`\n### ${name}${c.tenant ? ` (another tenant: ${c.tenant.clients} streams straight at the engine; ours / all tok/s)` : ''}\n`);
    header();
    const caps = [...new Set([...CAPS, ...(c.extraCaps ?? [])])].sort((a, b) => a - b);
    const rows = await sweepCaps({ mock, caps, clients: CLIENTS, warmup_ms: WARMUP, measure_ms: MEASURE, engine: c.engine, tenant: c.tenant });
    const best = bestCap(rows);
    const bestTok = best.figures.all_output_tokens_per_s;
    for (const r of rows) {
      row(`direct, cap ${r.cap}`, r.figures, bestTok);
      res.rows.push({ run: `direct, cap ${r.cap}`, ...r.figures });
    }
    const steadyWindow = { from_ms: WARMUP, to_ms: WARMUP + MEASURE };
    const fixed = figures(await viaPacerd(mock, c, { max_concurrent: best.cap }, { duration_ms: WARMUP + MEASURE }), steadyWindow);
    row(`pacerd, max_concurrent ${best.cap}`, fixed, bestTok);
    res.rows.push({ run: `pacerd, max_concurrent ${best.cap}`, ...fixed });
    const told = figures(await viaPacerd(mock, c, null, { duration_ms: WARMUP + MEASURE }), steadyWindow);
    row('pacerd, told nothing', told, bestTok);
    res.rows.push({ run: 'pacerd, told nothing', ...told });
    res.best = { cap: best.cap, output_tokens_per_s: bestTok };
    if (c.change) {
      const run = await viaPacerd(mock, c, null, { duration_ms: TIMED, events: [{ at_ms: CHANGE_AT, ...c.change }] });
      const before = figures(run, { from_ms: Math.max(WARMUP, CHANGE_AT - MEASURE), to_ms: CHANGE_AT });
      const after = figures(run, { from_ms: CHANGE_AT + 10000, to_ms: TIMED });
      row(`told nothing, before the change`, before, null);
      row(`told nothing, ${(CHANGE_AT + 10000) / 1000}–${TIMED / 1000} s`, after, bestTok);
      res.rows.push({ run: 'timed: before the change', ...before }, { run: 'timed: after the change', ...after });
      res.series = run.samples.map((s) => ({ t: Math.round(s.t), waiting: s.waiting, running: s.running, kv_blocks_used: s.kv_blocks_used }));
    }
  }
} finally {
  await mock.stop();
}
out.ended = new Date().toISOString();
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(out, null, 1));
