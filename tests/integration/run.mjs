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
//   … run.mjs --jobs 2 [FILTER]   (make test) two case files at a time, each in a process
//   of its own (its own mock, certificates and part of the port range); then, one at a
//   time, the tests marked `alone: true` (or in a file that exports `alone = true`):
//   those that measure fine timing or learning (sched_quality, store a., …), which a
//   neighbour's load would make noisy.
//   Output stays grouped per file; the numbers and the totals are the parent's.
//   --phase together|alone runs only one of the two (make test runs the container
//   test beside the first); ITEST_NUMBER_FROM numbers a second run on from the first.
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
  return test.alone ?? mod.alone ?? false;
}

function caseFiles() {
  return fs.readdirSync(path.join(here, 'cases')).filter((f) => f.endsWith('.mjs')).sort();
}

// --jobs: one child process per case file, `jobs` at a time, then the `alone` ones one
// by one. A child's lines are printed when it ends, renumbered; a child that ends
// without its summary line is one failure.
async function mainJobs() {
  const together = [];
  const alone = [];
  for (const file of caseFiles()) {
    let mod;
    try {
      mod = await import(pathToFileURL(path.join(here, 'cases', file)).href);
    } catch (e) {
      report(`${file.replace(/\.mjs$/, '')}: load`, e, 0);
      continue;
    }
    const label = file.replace(/\.mjs$/, '');
    const picked = (mod.tests ?? []).filter((t) => `${label}: ${t.name}`.includes(filter));
    // The longest first (by the sum of their time limits): the two processes then
    // end together rather than one waiting on a long file begun last.
    const weight = picked.filter((t) => !isAlone(mod, t)).reduce((a, t) => a + (t.timeout_ms ?? 15000), 0);
    if (weight > 0) together.push({ file, weight });
    if (picked.some((t) => isAlone(mod, t))) alone.push(file);
  }
  const children = new Set();
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      console.log(`# interrupted by ${sig}`);
      for (const c of children) c.kill('SIGTERM');
      process.exit(130);
    });
  }
  const ports = (slot) => `${20000 + slot * 6000}-${20000 + slot * 6000 + 5999}`;
  const runChild = (file, slot, part) => new Promise((resolve) => {
    const t0 = Date.now();
    const c = spawn(process.execPath, [fileURLToPath(import.meta.url), filter], {
      env: { ...process.env, ITEST_FILES: file, ITEST_PORTS: ports(slot), ITEST_PART: part },
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
        } else if (/^# [0-9.]+ s( |$)/.test(line)) {
          console.log(`# ${file} (${part}): ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        } else if (line !== '') {
          console.log(line);
        }
      }
      if (!summary) report(`${file}: its process ended without a summary (exit ${code ?? sig})`, new Error('see above'), Date.now() - t0);
      resolve();
    });
  });
  together.sort((a, b) => b.weight - a.weight);
  const queue = phase === 'alone' ? [] : together.map((x) => x.file);
  await Promise.all(Array.from({ length: Math.min(jobs, queue.length) }, async (_, slot) => {
    while (queue.length > 0) await runChild(queue.shift(), slot, 'together');
  }));
  if (phase !== 'together') for (const file of alone) await runChild(file, 0, 'alone');
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
  // A child of --jobs runs the part of the file it was given (ITEST_PART).
  const part = process.env.ITEST_PART;
  const selected = (mod.tests ?? []).filter((t) => `${label}: ${t.name}`.includes(filter) &&
    (!part || (part === 'alone') === isAlone(mod, t)));
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

const started = Date.now();
try {
  if ((jobs > 1 || phase !== 'all') && !onlyFiles) await mainJobs();
  else await main();
} catch (e) {
  report('harness', e, 0);
}
console.log(`# ${((Date.now() - started) / 1000).toFixed(1)} s${VALGRIND ? ' (pacerd under valgrind)' : ''}`);
console.log(`integration: ${passed} passed, ${failed} failed, ${reruns} passed on a rerun`);
// Exit now: a test that timed out may still hold sockets or timers.
process.exit(failed > 0 ? 1 : 0);
