// SPDX-License-Identifier: Apache-2.0
// make demo (scripts/demo.sh), in a faster variant: the mock at 600 RPM as a bucket of
// 10 (so that pacing shows within seconds), pacerd with no plan, 100 concurrent requests,
// `pacerd top` as one line a second (stdout is not a terminal here). The demo must end by
// itself, every request must succeed, and the wall time must stay near the floor the
// bucket sets: (100 - 10) / 10 per second = 9 s.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { MOCK_BIN, PACERD_BIN, ROOT, SLOW } from '../lib.mjs';

function runDemo(env, timeout_ms) {
  return new Promise((resolve) => {
    const p = spawn('sh', [path.join(ROOT, 'scripts/demo.sh')], {
      env: { ...process.env, PACERD_BIN, MOCK_BIN, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const timer = setTimeout(() => p.kill('SIGTERM'), timeout_ms);
    p.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, out }); });
  });
}

export const tests = [
  {
    name: 'make demo: 100 concurrent requests through a no-plan pacerd into a 600 RPM bucket of 10: all succeed, near the 9 s floor, top lines on the way',
    timeout_ms: 90000,
    fn: async () => {
      const r = await runDemo({ DEMO_REQUESTS: '100', DEMO_RPM: '600', DEMO_BURST: '10' }, 80000 * SLOW);
      const summary = r.out.split('\n').find((l) => l.startsWith('demo: 100 succeeded') || l.includes(' succeeded, '));
      console.log(`#   ${summary ?? r.out.slice(-400)}`);
      assert.equal(r.code, 0, `demo exit ${r.code} ${r.signal ?? ''}\n${r.out.slice(-2000)}`);
      const m = /demo: (\d+) succeeded, (\d+) errors, (\d+) upstream 429s absorbed by pacerd; wall ([\d.]+) s against a floor of ([\d.]+) s/.exec(r.out);
      assert.ok(m, `no summary line:\n${r.out.slice(-1000)}`);
      const [, ok, errors, , wall, floor] = m.map(Number);
      assert.equal(ok, 100);
      assert.equal(errors, 0);
      assert.equal(floor, 9);
      // Before the fit of r on R, a burst like this one taught a rate 600 times too
      // slow and the lane sat "probing" for the 300 s of retry.deadline_s.
      assert.ok(wall >= floor * 0.95 && wall <= (floor + 6) * SLOW, `wall ${wall} s against the floor of ${floor} s`);
      const tops = r.out.split('\n').filter((l) => /^\d\d:\d\d:\d\d in_flight \d+ req\/s/.test(l));
      assert.ok(tops.length >= 5, `pacerd top printed ${tops.length} lines`);
    },
  },
];
