// SPDX-License-Identifier: Apache-2.0
// What pacerd adds to a stream's first byte, against going direct, on a warm lane: the
// client of make bench's row (scripts/bench/first_byte.py: one thread, one selector,
// a connection per stream, the first byte timed from just before connect()), so that
// the client's own costs are the same on both paths and no start-up lands on one of
// them. Rounds alternate the paths after a warm-up of each.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { ROOT, SLOW } from '../lib.mjs';
import { startPacerdFor } from '../load.mjs';

// Run alone under run.mjs --jobs (nothing beside it): it measures a millisecond.
export const alone = true;

// The target is 3 ms at the median (printed); asserted within 10 ms, room for a
// machine whose two cores are shared with the mock and the client (one round swings by
// ±2 ms there). Measured on it: +0.3 ms at 1 stream, +0.5 to +1.6 ms at 20.
const TARGET_MS = 3;
const BOUND_MS = 10;

/** Runs first_byte.py; resolves with its JSON. */
function firstByte(args) {
  const script = path.join(ROOT, 'scripts/bench/first_byte.py');
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/python3', [script, ...args], { timeout: 60000 * SLOW }, (err, stdout, stderr) => {
      if (err) reject(new Error(`first_byte.py: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

export const tests = [
  {
    name: `20 concurrent streams through a warm lane with no plan: pacerd adds at most ${BOUND_MS} ms to the median first byte (target ${TARGET_MS} ms), 1 stream at a time the same`,
    timeout_ms: 90000,
    fn: async (t) => {
      const mock = await t.startMock();
      // info, as in production: debug lines for every request are not what is measured.
      const p = await startPacerdFor(t, mock, { log: { level: 'info' } });
      const paths = ['--path', `direct=${mock.http}`, '--path', `pacerd=${p.port}`];
      // 20 at a time: streams of 5 chunks 20 ms apart, so that the 20 overlap; 1 at a
      // time: short streams (the figure is the same, the run shorter).
      const c20 = await firstByte([...paths, '--concurrency', '20', '--streams', '40', '--rounds', '5']);
      const c1 = await firstByte([...paths, '--concurrency', '1', '--streams', '40', '--rounds', '3', '--chunk-ms', '0']);
      const st = await mock.stats();
      for (const r of [c1, c20]) {
        const a = r.added.pacerd;
        const line = `${r.concurrency} at a time: direct p50 ${r.paths.direct.p50_ms} ms, pacerd ${r.paths.pacerd.p50_ms} ms: ` +
          `added p50 ${a.p50_ms} ms (rounds ${a.rounds_p50_ms.join(', ')}), p99 ${a.p99_ms} ms; target ${TARGET_MS} ms`;
        console.log(`#   ${line}`);
        t.note?.(line);
        assert.equal(r.paths.direct.errors + r.paths.pacerd.errors, 0, `streams not answered 200: ${JSON.stringify(r.paths)}`);
        assert.equal(r.paths.pacerd.n, r.streams * r.rounds);
        assert.ok(a.p50_ms <= BOUND_MS * SLOW, `pacerd added ${a.p50_ms} ms to the median first byte at ${r.concurrency} at a time`);
      }
      // The 20 were in flight at once, on both paths.
      assert.ok(st.in_flight_max >= 20, `the mock saw at most ${st.in_flight_max} streams at once`);
    },
  },
];
