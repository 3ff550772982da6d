#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// The black-box integration suite of pacerd.
//
//   PACERD_BIN=build/pacerd MOCK_BIN=build/pacerd-mock node tests/integration/run.mjs [FILTER]
//   PACERD_WRAPPER=valgrind …   pacerd under valgrind; exit code 99 of any pacerd is a failure
//   PACERD_ITEST_KEEP=1 …       keep the temporary directory (configs, certificates)
//
// Each tests/integration/cases/*.mjs exports `tests`: [{name, timeout_ms?, fn: async (t) => …}]
// and optionally `config`: overrides merged into the base pacerd configuration of that
// file (lib.baseConfig), used by t.pacerd() (or an async function ({mock, certs}) returning them). FILTER (a substring of "file: name")
// selects tests. The last line is `integration: N passed, N failed, N passed on a rerun`
// (a timing test that fails gets one more run; one that then passes counts as passed,
// is marked `[passed on its rerun]` and is counted in the last number).
//
//   … run.mjs --jobs 6 [FILTER]   (make test) six case files at a time, each in a process
//   of its own (its own mock, certificates and part of the port range; a file that
//   exports `split = true` has a process per test); then the tests marked `alone: true`
//   (or in a file that exports `alone = true`), one at a time: those that measure fine
//   timing or learning (sched_quality 2., store a., …), which a neighbour's load would
//   make noisy; then those marked `alone: 'light'` (timing tests whose own load is a few
//   requests a second), each in a process of its own, `--jobs` at a time, with nothing
//   else beside them.
//   Output stays grouped per process, with its time and the CPU time of all it started
//   (`# file.mjs #N (part): wall s, CPU s`), the slowest listed at the end; the numbers
//   and the totals are the parent's.
//   --phase together|alone runs only one of the two (make test runs the container
//   test, the package stage, lint and fuzz beside the first); ITEST_NUMBER_FROM numbers
//   a second run on from the first.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  MOCK_BIN, PACERD_BIN, SLOW, VALGRIND, Mock, Pacerd, baseConfig, curl, freePort, makeCerts,
  makeTmpDir, merge, runPacerd,
} from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const jobsAt = argv.indexOf('--jobs');
const jobs = jobsAt >= 0 ? Math.max(1, Number(argv.splice(jobsAt, 2)[1]) || 1) : 1;
const phaseAt = argv.indexOf('--phase');
const phase = phaseAt >= 0 ? argv.splice(phaseAt, 2)[1] : 'all';
if (!['all', 'together', 'alone'].includes(phase)) {
  console.log(`--phase ${phase}: together, alone or all`);
  process.exit(2);
}
const filter = argv[0] ?? '';
// A child of --jobs: the case files it runs (comma-separated).
const onlyFiles = process.env.ITEST_FILES ? process.env.ITEST_FILES.split(',') : null;
let n = Number(process.env.ITEST_NUMBER_FROM ?? 0) || 0;
let passed = 0;
let failed = 0;
// Timing tests that failed once and passed when run again: counted apart and
// named in the summary line, so that flakiness shows in CI's output instead of
// being absorbed.
let reruns = 0;
const RERUN_MARK = ' [passed on its rerun]';

function report(name, err, ms, notes = [], rerun = false) {
  n++;
  if (!err) {
    passed++;
    if (rerun) reruns++;
    console.log(`ok ${n} - ${name} (${ms} ms)${rerun ? RERUN_MARK : ''}`);
    for (const l of notes) console.log(`# ${l}`);
  } else {
    failed++;
    const msg = (err instanceof Error ? err.message : String(err)).split('\n');
    console.log(`not ok ${n} - ${name}: ${msg[0]}`);
    for (const l of msg.slice(1)) console.log(`#   ${l}`);
  }
}

process.on('unhandledRejection', (e) => console.log(`# late error (after its test ended): ${e?.message ?? e}`));

async function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: timed out after ${ms} ms`)), ms); });
  try { return await Promise.race([promise, t]); } finally { clearTimeout(timer); }
}

async function main() {
  for (const [label, bin] of [['PACERD_BIN', PACERD_BIN], ['MOCK_BIN', MOCK_BIN]]) {
    if (!fs.existsSync(bin)) {
      report(`setup: ${label} exists`, new Error(`${bin} not found (make ${path.relative(process.cwd(), bin)})`), 0);
      return;
    }
  }
  const tmp = makeTmpDir();
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      console.log(`# interrupted by ${sig}`);
      if (!process.env.PACERD_ITEST_KEEP) fs.rmSync(tmp, { recursive: true, force: true });
      process.exit(130); // the exit handler of lib.mjs kills what we started
    });
  }
  let mock;
  try {
    const certs = makeCerts(path.join(tmp, 'certs'));
    mock = await Mock.start({ certs });
    const files = onlyFiles ?? caseFiles();
    for (const file of files) await runFile(file, { tmp, certs, mock });
  } catch (e) {
    report('setup (certificates, mock upstream)', e, 0);
  } finally {
    if (mock) {
      try { await mock.stop(); } catch (e) { console.log(`# shared mock: ${e.message}`); }
    }
    if (process.env.PACERD_ITEST_KEEP) console.log(`# kept ${tmp}`);
    else fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// A test runs alone when it says so (`alone: true`), or its file does and it does
// not say otherwise (`alone: false`).
function isAlone(mod, test) {
  return Boolean(test.alone ?? mod.alone ?? false);
}

// A timing test that is light (`alone: 'light'`) may run beside other light ones.
function isLight(mod, test) {
  return (test.alone ?? mod.alone) === 'light';
}

function caseFiles() {
  return fs.readdirSync(path.join(here, 'cases')).filter((f) => f.endsWith('.mjs')).sort();
}

// --jobs: the case files in child processes, `jobs` at a time (longest first), then the
// `alone` tests: those marked `alone: true` one unit at a time, with nothing beside
// them; then those marked `alone: 'light'` (a timing test that is light itself: a few
// requests a second against its own mock and pacerd), each in a process of its own,
// up to `jobs` of them at a time and nothing else beside them. A unit is a file's tests
// of one part in one process, or one test alone where its file exports `split = true`
// (long tests that would keep one process busy while the others have finished: each
// test of such a file must pass by itself, as a FILTER that names it runs it). A
// child's lines are printed when it ends, renumbered; a child that ends without its
// summary line is one failure.
async function mainJobs() {
  const together = [];
  const alone = [];
  const light = [];
  for (const file of caseFiles()) {
    let mod;
    try {
      mod = await import(pathToFileURL(path.join(here, 'cases', file)).href);
    } catch (e) {
      report(`${file.replace(/\.mjs$/, '')}: load`, e, 0);
      continue;
    }
    const label = file.replace(/\.mjs$/, '');
    const picked = (mod.tests ?? []).map((t, index) => ({ t, index })).filter(({ t }) => `${label}: ${t.name}`.includes(filter));
    // A unit's weight is the sum of its tests' time limits: the longest start first, so
    // that the processes end together rather than one waiting on a long unit begun last.
    const weigh = (xs) => xs.reduce((sum, { t }) => sum + (t.timeout_ms ?? 15000), 0);
    const units = (xs, part, each) => {
      if (xs.length === 0) return [];
      if (!each) return [{ file, part, weight: weigh(xs) }];
      return xs.map((x) => ({ file, part, test: x.index, weight: weigh([x]) }));
    };
    together.push(...units(picked.filter(({ t }) => !isAlone(mod, t)), 'together', mod.split));
    alone.push(...units(picked.filter(({ t }) => isAlone(mod, t) && !isLight(mod, t)), 'alone', mod.split));
    light.push(...units(picked.filter(({ t }) => isLight(mod, t)), 'alone', true));
  }
  const children = new Set();
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      console.log(`# interrupted by ${sig}`);
      for (const c of children) c.kill('SIGTERM');
      process.exit(130);
    });
  }
  // The port range of the processes that run at once, in equal parts (the container
  // test of make test takes 32000-32767, beside the first phase).
  const ports = (slot, of) => {
    const size = Math.floor(12000 / of);
    return `${20000 + slot * size}-${20000 + (slot + 1) * size - 1}`;
  };
  const durations = [];
  const runChild = (u, slot, of) => new Promise((resolve) => {
    const t0 = Date.now();
    const what = `${u.file}${u.test === undefined ? '' : ` #${u.test + 1}`} (${u.part})`;
    const c = spawn(process.execPath, [fileURLToPath(import.meta.url), filter], {
      env: { ...process.env, ITEST_FILES: u.file, ITEST_PORTS: ports(slot, of), ITEST_PART: u.part, ITEST_TEST: u.test ?? '' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.add(c);
    let out = '';
    c.stdout.on('data', (d) => { out += d; });
    c.on('close', (code, sig) => {
      children.delete(c);
      let summary = false;
      for (const line of out.split('\n')) {
        let m;
        if ((m = /^(not ok|ok) \d+ - (.*)$/.exec(line))) {
          n++;
          if (m[1] === 'ok') passed++;
          else failed++;
          if (m[1] === 'ok' && m[2].endsWith(RERUN_MARK)) reruns++;
          console.log(`${m[1]} ${n} - ${m[2]}`);
        } else if (/^integration: \d+ passed, \d+ failed, \d+ passed on a rerun$/.test(line)) {
          summary = true;
        } else if ((m = /^# [0-9.]+ s(?: \(([0-9.]+) s CPU\))?/.exec(line))) {
          const s = (Date.now() - t0) / 1000;
          durations.push({ what, s, cpu: m[1] === undefined ? null : Number(m[1]) });
          console.log(`# ${what}: ${s.toFixed(1)} s${m[1] === undefined ? '' : `, ${m[1]} s CPU`}`);
        } else if (line !== '') {
          console.log(line);
        }
      }
      if (!summary) report(`${what}: its process ended without a summary (exit ${code ?? sig})`, new Error('see above'), Date.now() - t0);
      resolve();
    });
  });
  // `jobs` workers take units from a queue, the longest first.
  const pool = async (units) => {
    const queue = [...units].sort((x, y) => y.weight - x.weight);
    const width = Math.min(jobs, queue.length);
    await Promise.all(Array.from({ length: width }, async (_, slot) => {
      while (queue.length > 0) await runChild(queue.shift(), slot, width);
    }));
  };
  if (phase !== 'alone') await pool(together);
  if (phase !== 'together') {
    for (const u of alone) await runChild(u, 0, 1);
    await pool(light);
  }
  // Where the time went: the slowest units of this run (wall, and the CPU of the
  // process and all it started).
  durations.sort((a, b) => b.s - a.s);
  for (const d of durations.slice(0, 12)) {
    console.log(`# slowest: ${d.s.toFixed(1).padStart(6)} s ${d.cpu === null ? '' : `${d.cpu.toFixed(1).padStart(6)} s CPU `} ${d.what}`);
  }
}

async function runFile(file, shared) {
  const label = file.replace(/\.mjs$/, '');
  let mod;
  try {
    mod = await import(pathToFileURL(path.join(here, 'cases', file)).href);
  } catch (e) {
    report(`${label}: load`, e, 0);
    return;
  }
  // A child of --jobs runs the part of the file it was given (ITEST_PART), or one test
  // of it (ITEST_TEST, its index: a light timing test is always given so).
  const part = process.env.ITEST_PART;
  const only = process.env.ITEST_TEST ? Number(process.env.ITEST_TEST) : null;
  const inPart = (t) => !part || (part === 'alone' ? isAlone(mod, t) && (only !== null || !isLight(mod, t)) : !isAlone(mod, t));
  const selected = (mod.tests ?? []).filter((t, i) => `${label}: ${t.name}`.includes(filter) && inPart(t) && (only === null || i === only));
  if (selected.length === 0) return;
  const dir = fs.mkdtempSync(path.join(shared.tmp, `${label}-`));
  const fileState = { pacerd: null, starting: null };

  // The file's shared pacerd, started on first use with the file's config.
  const filePacerd = async () => {
    if (fileState.pacerd) {
      if (!fileState.pacerd.alive) throw new Error(`the shared pacerd of ${file} has exited: ${JSON.stringify(fileState.pacerd.proc.exit)}`);
      return fileState.pacerd;
    }
    fileState.starting ??= (async () => {
      const port = await freePort();
      const over = typeof mod.config === 'function' ? await mod.config(shared) : mod.config;
      const cfg = merge(baseConfig({ port, mock: shared.mock, certs: shared.certs }), over);
      fileState.pacerd = await Pacerd.start({ dir, config: cfg, port });
      return fileState.pacerd;
    })();
    return fileState.starting;
  };

  // One run of a test: its error (null: passed) and its notes.
  const attempt = async (test) => {
    const cleanups = [];
    const notes = [];
    const t = {
      /** A measurement worth printing under the ok line. */
      note: (msg) => notes.push(msg),
      mock: shared.mock,
      certs: shared.certs,
      dir,
      slow: SLOW,
      valgrind: VALGRIND,
      defer: (fn) => cleanups.push(fn),
      pacerd: filePacerd,
      baseConfig: (port, over) => merge(baseConfig({ port, mock: shared.mock, certs: shared.certs }), over),
      /** A pacerd of this test only (stopped, exit code checked, at its end). */
      startPacerd: async ({ config, env, args, port } = {}) => {
        port ??= await freePort();
        const cfg = typeof config === 'string' ? config : t.baseConfig(port, config);
        const p = await Pacerd.start({ dir, config: cfg, port, env, args });
        cleanups.push(() => p.stop());
        return p;
      },
      /** A mock of this test only. */
      startMock: async (opts) => {
        const m = await Mock.start(opts);
        cleanups.push(async () => { if (m.proc.alive) await m.stop(); });
        return m;
      },
      // A pacerd that gets as far as making its CA makes it in the test's directory.
      runPacerd: (args, opts = {}) => runPacerd(args, { ...opts, env: { STATE_DIRECTORY: dir, ...(opts.env ?? {}) } }),
      curl: (args, opts) => curl(args, { dir, ...opts }),
    };
    let err = null;
    try {
      await shared.mock.reset();
      await withTimeout(test.fn(t), (test.timeout_ms ?? 15000) * SLOW, 'test');
    } catch (e) {
      err = e;
    }
    for (const c of cleanups.reverse()) {
      try { await c(); } catch (e) { err ??= e; }
    }
    return { err, notes };
  };

  for (const test of selected) {
    const t0 = Date.now();
    let { err, notes } = await attempt(test);
    let rerun = false;
    // A test that measures timing (alone) gets a second run when the first fails: this
    // machine is a VM on a shared host whose stalls of several ms come and go. Failing
    // twice is a failure; the first failure is printed either way.
    if (err && isAlone(mod, test) && process.env.ITEST_TIMING_RETRY !== '0') {
      const first = (err instanceof Error ? err.message : String(err)).split('\n')[0];
      console.log(`# ${label}: ${test.name.slice(0, 60)}…: failed once (${first.slice(0, 300)}); run again`);
      ({ err, notes } = await attempt(test));
      rerun = true;
    }
    report(`${label}: ${test.name}`, err, Date.now() - t0, notes, rerun);
  }

  if (fileState.starting) {
    const t0 = Date.now();
    let err = null;
    try {
      const p = await fileState.starting;
      await p.stop({ timeout_ms: 5000 });
    } catch (e) {
      err = e;
    }
    report(`${label}: shared pacerd exits 0 on SIGTERM${VALGRIND ? ' (valgrind clean)' : ''}`, err, Date.now() - t0);
  }
}

/**
 * The CPU seconds of this process and of the processes it started and has waited for
 * (pacerd, the mocks, redis-server, …): /proc/self/stat's utime, stime, cutime and
 * cstime, in clock ticks of 1/100 s (Linux's USER_HZ). Null where there is no /proc.
 */
function cpuSeconds() {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  } catch {
    return null;
  }
}

const started = Date.now();
try {
  if ((jobs > 1 || phase !== 'all') && !onlyFiles) await mainJobs();
  else await main();
} catch (e) {
  report('harness', e, 0);
}
const cpu = cpuSeconds();
console.log(`# ${((Date.now() - started) / 1000).toFixed(1)} s${cpu === null ? '' : ` (${cpu.toFixed(1)} s CPU)`}${VALGRIND ? ' (pacerd under valgrind)' : ''}`);
console.log(`integration: ${passed} passed, ${failed} failed, ${reruns} passed on a rerun`);
// Exit now: a test that timed out may still hold sockets or timers.
process.exit(failed > 0 ? 1 : 0);
