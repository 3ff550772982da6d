// SPDX-License-Identifier: Apache-2.0
// The latency controller against an engine that queues (issue 29, its Tests): pacerd
// told nothing, in front of pacerd-mock's engine mode (a vLLM-like server that batches,
// queues inside and preempts, and never refuses; tests/mock/README.md, "Engine mode"),
// 128 closed-loop streaming clients of 1,024-token prompts. Beside each run, in the same
// test, a second mock of the same engine is swept with fixed caps of the clients' own
// (straight at it, one cap after the other): the best of them is what pacerd must come
// within 90 % of, so that the machine's load weighs on both alike.
//
// The engine runs SCALE times its default step times (the knee is its KV cache's, not its
// speed's: 29 requests of 1,024 + 128 tokens), so that a run of a few engine minutes takes
// a fraction of that here; every duration below is in the engine's own seconds (E), at
// SCALE real seconds each. The figures are the mock's own: upstream first token (arrival
// at the mock to the first token) against the unloaded one (one prefill step), the
// time-averaged queue inside the engine, the share of finished requests preempted at
// least once, output tokens per second (the engine's, every tenant's).
//
//   steady, then every step 2× slower   after the warm-up, >= 90 % of the best fixed cap,
//                                       first token p50 <= 2× and p99 <= 5× unloaded, queue
//                                       <= 1, preempted <= 0.5 %; after the change the
//                                       limit never under 0.75× the knee it held, >= 90 %
//                                       of the slower engine's best, and the rest as steady
//   the KV cache halves                 from 30 E after the change: queue <= 1, >= 90 % of
//                                       the new best
//   another tenant's streams start      from 30 E after the change, beside 16 streams
//                                       straight at the engine: the limit never under
//                                       0.75× the best cap beside them, >= 90 % of its
//                                       throughput, queue <= 1
// Each note prints the window's first-token times and preemptions too (the changed cases
// are not held to the steady bounds: docs/pacing.md, "Engines that queue").
//
// PACERD_ENGINE_SCALE overrides SCALE (1: the issue's own speeds, four times longer);
// PACERD_ENGINE_TRACE=1 prints every sample (the engine's queue and batch, the limit and
// why it last moved).
import assert from 'node:assert/strict';
import { freePort, request } from '../lib.mjs';
import {
  ENGINE_DEFAULTS, bestCap, figures, runEngineLoad, startEngine, startPacerdForEngine, sweepStepwise,
} from '../lib/engine.mjs';

export const alone = true;

const SCALE = Number(process.env.PACERD_ENGINE_SCALE ?? 0.25);
/** Real ms of `e` engine seconds. */
const E = (e) => e * 1000 * SCALE;
const CLIENTS = 128;
const TENANT = { name: 'other', clients: 16 };
/** A sweep's step: E of warm-up, then E measured, per cap. */
const SWEEP = { warmup_ms: E(10), measure_ms: E(20) };

/** pacerd told nothing in front of `mock`, its admin listener on for /status. */
async function pacerdTellingNothing(t, mock) {
  const admin = await freePort();
  const p = await startPacerdForEngine(t, mock, { over: { admin: { listen: `127.0.0.1:${admin}` } } });
  p.adminUrl = `http://127.0.0.1:${admin}`;
  return p;
}

/** The latency controller's view of the one lane. */
async function laneConcurrency(p) {
  const st = JSON.parse((await request(`${p.adminUrl}/status`, { timeout_ms: 5000 })).body);
  const lane = st.lanes[0];
  return lane ? { limit: lane.concurrency_limit, why: lane.concurrency?.why, queue: lane.concurrency?.server_queue } : null;
}

/** The limits /status showed between from_ms and to_ms of the run. */
const limitsIn = (run, from_ms, to_ms) => run.samples.filter((s) => s.t >= from_ms && s.t <= to_ms && s.extra).map((s) => s.extra.limit);

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const pct = (x) => `${Math.round(x)} %`;

function describe(label, f, best) {
  return `${label}: ${f.all_output_tokens_per_s} tok/s (${pct((100 * f.all_output_tokens_per_s) / best.figures.all_output_tokens_per_s)} of cap ` +
    `${best.cap}'s ${best.figures.all_output_tokens_per_s}), first token p50 ${f.ttft_p50_x}× p99 ${f.ttft_p99_x}× unloaded, ` +
    `queue ${f.mean_waiting}, preempted ${f.preempted_pct} % of ${f.finished_n}`;
}

/** Throughput >= 90 % of the sweep's best and the queue inside the server <= 1. */
function assertHeld(what, f, best) {
  const ratio = f.all_output_tokens_per_s / best.figures.all_output_tokens_per_s;
  assert.ok(ratio >= 0.9, `${what}: ${describe('throughput', f, best)}`);
  assert.ok(f.mean_waiting <= 1, `${what}: ${describe('queue', f, best)}`);
  assert.equal(f.client_errors, 0, `${what}: client errors`);
}

/** The steady bounds of issue 29 over a window `f` against the sweep's `best`. */
function assertSteady(what, f, best) {
  assertHeld(what, f, best);
  assert.ok(f.ttft_p50_x <= 2 && f.ttft_p99_x <= 5, `${what}: ${describe('first token', f, best)}`);
  assert.ok(f.preempted_pct <= 0.5, `${what}: ${describe('preemptions', f, best)}`);
}

/**
 * pacerd told nothing against mock `a` for duration_ms with `events`, and beside it, on
 * mock `b`, the sweeps `sweeps` ([{engine, caps, tenant}], one after the other). Returns
 * {run, bests: [best of each sweep]}.
 */
async function runBesideSweeps(t, { engine, duration_ms, events, sweeps }) {
  const a = await startEngine(t, { ...engine });
  const b = await startEngine(t, { ...engine });
  const p = await pacerdTellingNothing(t, a);
  const sweeping = (async () => {
    const bests = [];
    for (const s of sweeps) bests.push(bestCap(await sweepStepwise({ mock: b, clients: CLIENTS, ...SWEEP, ...s })));
    return bests;
  })();
  const run = await runEngineLoad({
    mock: a, url: p.url, clients: CLIENTS, duration_ms, events, sample_ms: 250,
    onSample: () => laneConcurrency(p).catch(() => null),
  });
  const bests = await sweeping;
  if (process.env.PACERD_ENGINE_TRACE) {
    for (const s of run.samples) {
      if (s.extra) console.log(`#   ${(s.t / 1000).toFixed(2)} s: waiting ${s.waiting} running ${s.running} limit ${s.extra.limit} ${s.extra.why} queue ${s.extra.queue?.toFixed(2)}`);
    }
    console.log(`#   sweeps: ${JSON.stringify(bests.map((b) => [b.cap, b.figures.all_output_tokens_per_s]))}`);
  }
  return { run, bests };
}

export const tests = [
  {
    name: 'steady, then every step 2x slower: the knee found and held (>= 90 % of the best fixed cap, first token p50 <= 2x and p99 <= 5x unloaded, queue <= 1, preempted <= 0.5 %); slower, the limit stays (>= 0.75x the knee) and the same bounds',
    timeout_ms: E(230) + 60000,
    fn: async (t) => {
      const base = { step_scale: SCALE };
      const slower = { step_scale: 2 * SCALE };
      const WARM = 90, STEADY = 40, SETTLE = 20, SLOW = 60;
      const change = E(WARM + STEADY);
      const { run, bests: [best, bestSlow] } = await runBesideSweeps(t, {
        engine: base,
        duration_ms: change + E(SETTLE + SLOW),
        events: [{ at_ms: change, engine: slower }],
        sweeps: [{ engine: base, caps: [20, 28, 36] }, { engine: slower, caps: [20, 28, 36] }],
      });
      const steady = figures(run, { from_ms: E(WARM), to_ms: change });
      const slow = figures(run, { from_ms: change + E(SETTLE), to_ms: run.duration_ms });
      const knee = median(limitsIn(run, E(WARM), change));
      const after = limitsIn(run, change, run.duration_ms);
      t.note(describe(`steady (${E(WARM) / 1000}-${change / 1000} s)`, steady, best) + `; limit ${knee}`);
      t.note(describe(`2x slower (${(change + E(SETTLE)) / 1000}-${run.duration_ms / 1000} s)`, slow, bestSlow) +
        `; limit in [${Math.min(...after)}, ${Math.max(...after)}]`);
      assertSteady('steady', steady, best);
      assert.ok(Math.min(...after) >= 0.75 * knee, `2x slower: the limit fell to ${Math.min(...after)} from the knee ${knee}`);
      assertSteady('2x slower', slow, bestSlow);
    },
  },
  {
    name: 'the KV cache halves mid-run: within 30 s (engine time) the queue inside the server <= 1 and >= 90 % of the best fixed cap for the new capacity',
    timeout_ms: E(160) + 60000,
    fn: async (t) => {
      const base = { step_scale: SCALE };
      const half = { kv_tokens: ENGINE_DEFAULTS.kv_tokens / 2 };
      const WARM = 60, SETTLE = 30, AFTER = 60;
      const change = E(WARM);
      const { run, bests: [best] } = await runBesideSweeps(t, {
        engine: base,
        duration_ms: change + E(SETTLE + AFTER),
        events: [{ at_ms: change, engine: half }],
        sweeps: [{ engine: { ...base, ...half }, caps: [10, 14, 18] }],
      });
      const f = figures(run, { from_ms: change + E(SETTLE), to_ms: run.duration_ms });
      const limits = limitsIn(run, change + E(SETTLE), run.duration_ms);
      t.note(describe(`halved, ${(change + E(SETTLE)) / 1000}-${run.duration_ms / 1000} s`, f, best) +
        `; limit in [${Math.min(...limits)}, ${Math.max(...limits)}]`);
      assertHeld('KV halved', f, best);
    },
  },
  {
    name: 'another tenant\'s 16 streams start reaching the engine directly: within 30 s (engine time) the limit >= 0.75x the best fixed cap beside them, >= 90 % of its throughput, the queue inside the server <= 1',
    timeout_ms: E(160) + 60000,
    fn: async (t) => {
      const base = { step_scale: SCALE };
      const WARM = 60, SETTLE = 30, AFTER = 60;
      const change = E(WARM);
      const { run, bests: [best] } = await runBesideSweeps(t, {
        engine: base,
        duration_ms: change + E(SETTLE + AFTER),
        events: [{ at_ms: change, tenant: TENANT }],
        sweeps: [{ engine: base, caps: [8, 13, 18], tenant: TENANT }],
      });
      const f = figures(run, { from_ms: change + E(SETTLE), to_ms: run.duration_ms });
      const limits = limitsIn(run, change + E(SETTLE), run.duration_ms);
      t.note(describe(`beside the tenant, ${(change + E(SETTLE)) / 1000}-${run.duration_ms / 1000} s`, f, best) +
        `; limit in [${Math.min(...limits)}, ${Math.max(...limits)}]`);
      assertHeld('another tenant', f, best);
      assert.ok(Math.min(...limits) >= 0.75 * best.cap, `another tenant: the limit fell to ${Math.min(...limits)}, the best cap beside it ${best.cap}`);
    },
  },
];
