#!/usr/bin/env node
// The black-box integration suite of pacerd.
//
//   PACERD_BIN=build/pacerd MOCK_BIN=build/pacerd-mock node tests/integration/run.mjs [FILTER]
//   PACERD_WRAPPER=valgrind …   pacerd under valgrind; exit code 99 of any pacerd is a failure
//   PACERD_ITEST_KEEP=1 …       keep the temporary directory (configs, certificates)
//
// Each tests/integration/cases/*.mjs exports `tests`: [{name, timeout_ms?, fn: async (t) => …}]
// and optionally `config`: overrides merged into the base pacerd configuration of that
// file (lib.baseConfig), used by t.pacerd() (or an async function ({mock, certs}) returning them). FILTER (a substring of "file: name")
// selects tests. The last line is `integration: N passed, N failed`.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  MOCK_BIN, PACERD_BIN, SLOW, VALGRIND, Mock, Pacerd, baseConfig, curl, freePort, makeCerts,
  makeTmpDir, merge, runPacerd,
} from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2] ?? '';
let n = 0;
let passed = 0;
let failed = 0;

function report(name, err, ms, notes = []) {
  n++;
  if (!err) {
    passed++;
    console.log(`ok ${n} - ${name} (${ms} ms)`);
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
    const files = fs.readdirSync(path.join(here, 'cases')).filter((f) => f.endsWith('.mjs')).sort();
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

async function runFile(file, shared) {
  const label = file.replace(/\.mjs$/, '');
  let mod;
  try {
    mod = await import(pathToFileURL(path.join(here, 'cases', file)).href);
  } catch (e) {
    report(`${label}: load`, e, 0);
    return;
  }
  const selected = (mod.tests ?? []).filter((t) => `${label}: ${t.name}`.includes(filter));
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

  for (const test of selected) {
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
    const t0 = Date.now();
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
    report(`${label}: ${test.name}`, err, Date.now() - t0, notes);
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
  await main();
} catch (e) {
  report('harness', e, 0);
}
console.log(`# ${((Date.now() - started) / 1000).toFixed(1)} s${VALGRIND ? ' (pacerd under valgrind)' : ''}`);
console.log(`integration: ${passed} passed, ${failed} failed`);
// Exit now: a test that timed out may still hold sockets or timers.
process.exit(failed > 0 ? 1 : 0);
