// SPDX-License-Identifier: Apache-2.0
// Reload (DESIGN §7): SIGHUP reads the file again. An invalid file is reported
// (file:line:column) and the running configuration stays; a valid one applies
// to the next dispatch of every lane, and nothing in flight is dropped.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { SLOW, request, waitFor } from '../lib.mjs';
import { runLoad, startPacerdFor } from '../load.mjs';

const logged = (p, event) => p.logs().filter((l) => l.event === event);

/** Requests per second the mock saw over a burst of `n` requests. */
async function paceOf(p, mock, n) {
  await mock.reset();
  const run = await runLoad({
    base: p.url, n, concurrency: n, deadline_ms: 15000 * SLOW,
    makeRequest: () => ({ path: '/v1/models', method: 'GET', headers: { authorization: 'Bearer sk-reload-0001' } }),
  });
  const recs = await mock.requests();
  assert.equal(recs.length, n, `the mock saw ${recs.length} of ${n} requests`);
  const span = (recs.at(-1).t_ms - recs[0].t_ms) / 1000;
  return { span, statuses: run.results.map((r) => r.status) };
}

export const tests = [
  {
    name: 'SIGHUP: a bad file keeps the running limits; a good one changes the pace of an existing lane; a request in flight completes',
    timeout_ms: 40000 * SLOW,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { plans: { default: { max_requests_per_second: 4 } } });
      const good = fs.readFileSync(p.configFile, 'utf8');

      // 4 rps: 5 requests span about 1 s.
      const slow = await paceOf(p, mock, 5);
      assert.ok(slow.span >= 0.85, `5 requests at 4 rps spanned ${slow.span} s`);

      // An invalid file: reported with its position, nothing changes.
      fs.writeFileSync(p.configFile, good.replace('max_requests_per_second: 4', 'max_requests_per_second: fast'));
      p.proc.signal('SIGHUP');
      const failed = await waitFor(() => logged(p, 'config_reload_failed')[0], { timeout_ms: 3000 * SLOW, what: 'config_reload_failed' });
      assert.match(failed.error, /pacerd-\d+\.yaml:\d+:\d+: /, `error without file:line:column: ${failed.error}`);
      const still = await paceOf(p, mock, 5);
      assert.ok(still.span >= 0.85, `after a failed reload 5 requests spanned ${still.span} s: the old limit must stay`);

      // A request in flight across the reload (the mock answers after 1.5 s).
      const inflight = request(`${p.url}/v1/models`, { headers: { 'x-mock-delay-ms': '1500', authorization: 'Bearer sk-reload-0002' }, timeout_ms: 10000 * SLOW });

      // A valid file with a higher limit: the same lane speeds up.
      fs.writeFileSync(p.configFile, good.replace('max_requests_per_second: 4', 'max_requests_per_second: 100'));
      p.proc.signal('SIGHUP');
      await waitFor(() => logged(p, 'config_reloaded')[0], { timeout_ms: 3000 * SLOW, what: 'config_reloaded' });
      const fast = await paceOf(p, mock, 10);
      assert.ok(fast.span < 0.5 * SLOW, `after the reload 10 requests spanned ${fast.span} s (100 rps expected)`);
      assert.deepEqual([...new Set(fast.statuses)], [200]);

      const r = await inflight;
      assert.equal(r.status, 200, 'the request in flight during the reload was dropped');
      assert.ok(p.alive);
    },
  },
  {
    name: 'SIGHUP with another listen address in the file: the bound address stays, with a warning',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock);
      const cfg = fs.readFileSync(p.configFile, 'utf8');
      fs.writeFileSync(p.configFile, cfg.replace(/listen: "?127\.0\.0\.1:\d+"?/, 'listen: "127.0.0.1:1"'));
      p.proc.signal('SIGHUP');
      await waitFor(() => logged(p, 'config_reloaded')[0], { timeout_ms: 3000 * SLOW, what: 'config_reloaded' });
      assert.ok(p.logs().some((l) => l.event === 'config_reload' && /restart/.test(l.message)), 'no warning about the listen address');
      const r = await request(`${p.url}/v1/models`);
      assert.equal(r.status, 200);
    },
  },
];


