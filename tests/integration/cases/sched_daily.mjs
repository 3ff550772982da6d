// SPDX-License-Identifier: Apache-2.0
// Daily budgets (issue 8.4): max_requests_per_day is a budget, not a rate: spent as
// fast as the other gates allow, then every request of the lane, queued or new, is
// answered at once with 429 daily_budget_exhausted until the reset (day_resets_at in
// day_time_zone), and none reaches the upstream.
import assert from 'node:assert/strict';
import { SLOW, freePort, keyHash, request, tryConnect, waitFor } from '../lib.mjs';
import { chatBody, keyEntry, runLoad, send, startPacerdFor, summarize } from '../load.mjs';

/** "HH:MM" in UTC, `hours` from now: a reset far from the test either way. */
function utcHHMM(hours) {
  const d = new Date(Date.now() + hours * 3600000);
  return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
}

export const tests = [
  {
    name: 'max_requests_per_day: 20: 20 succeed, the queued rest and every later request get 429 daily_budget_exhausted at once, none upstream',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock();
      const aport = await freePort();
      const key = 'sk-daily-0001';
      const p = await startPacerdFor(t, mock, {
        admin: { listen: `127.0.0.1:${aport}` },
        plans: { daily: { max_requests_per_second: 50, max_requests_per_day: 20, day_resets_at: utcHHMM(12), day_time_zone: 'UTC' } },
        keys: [keyEntry(key, 'daily')],
      });
      const hdrs = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      // 25 at once: the budget goes at the 50 req/s gate's pace, the last 5 wait in the
      // queue and are answered when the 21st reaches its head.
      const run = await runLoad({ base: p.url, n: 25, concurrency: 25, makeRequest: () => ({ path: '/v1/chat/completions', headers: hdrs, body: chatBody() }), deadline_ms: 10000 });
      const sum = summarize(run);
      const refused = run.results.filter((r) => r.status === 429);
      console.log(`#   daily: statuses ${JSON.stringify(sum.statuses)}; mock requests ${(await mock.stats()).requests}`);
      assert.equal(sum.ok, 20, JSON.stringify(sum.statuses));
      assert.equal(refused.length, 5, JSON.stringify(sum.statuses));
      for (const r of refused) {
        assert.equal(JSON.parse(r.body).error?.code, 'daily_budget_exhausted', r.body);
        assert.equal(r.headers['x-should-retry'], 'false', 'a reset 12 h away: no retry-after, x-should-retry: false');
        assert.equal(r.headers['retry-after'], undefined);
      }
      // The 26th: at once, never upstream.
      const r = await send(`${p.url}/v1/chat/completions`, { headers: hdrs, body: chatBody(), timeout_ms: 5000 });
      const ms = r.end - r.start;
      console.log(`#   daily: the 26th: ${r.status} in ${ms} ms: ${r.body}`);
      assert.equal(r.status, 429);
      assert.equal(JSON.parse(r.body).error?.code, 'daily_budget_exhausted');
      assert.ok(ms <= 5 * SLOW, `answered in ${ms} ms`);
      assert.equal((await mock.stats()).requests, 20, 'requests that reached the mock');
      // Another key of the same provider is not affected.
      const other = await send(`${p.url}/v1/chat/completions`, { headers: { ...hdrs, authorization: 'Bearer sk-daily-other' }, body: chatBody(), timeout_ms: 5000 });
      assert.equal(other.status, 200);
      await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 5000 * SLOW, what: 'the admin port' });
      const lane = JSON.parse((await request(`http://127.0.0.1:${aport}/status`)).body).lanes.find((l) => l.key === keyHash(key));
      assert.equal(lane?.state, 'daily_budget_exhausted', JSON.stringify(lane));
      assert.equal(lane.day.requests, 20);
      assert.ok(lane.day.resets_in_ms > 11 * 3600000 && lane.day.resets_in_ms <= 12 * 3600000 + 60000, `resets_in_ms ${lane.day.resets_in_ms}`);
    },
  },
  {
    name: '--check-config: day_resets_at and day_time_zone are checked, with file:line:column',
    fn: async (t) => {
      const fs = await import('node:fs');
      const path = `${t.dir}/daily-bad.yaml`;
      fs.writeFileSync(path, 'plans:\n  default:\n    day_time_zone: Mars/Olympus_Mons\n');
      const a = await t.runPacerd(['--check-config', '-c', path]);
      assert.notEqual(a.code, 0);
      assert.match(a.stderr, /daily-bad\.yaml:3:20: .*unknown time zone 'Mars\/Olympus_Mons'/);
      fs.writeFileSync(path, 'plans:\n  default:\n    day_resets_at: "24:00"\n');
      const b = await t.runPacerd(['--check-config', '-c', path]);
      assert.notEqual(b.code, 0);
      assert.match(b.stderr, /daily-bad\.yaml:3:20: .*HH:MM/);
      fs.writeFileSync(path, 'plans:\n  default:\n    max_requests_per_day: 1000\n    day_resets_at: "00:00"\n    day_time_zone: America/Los_Angeles\n');
      const c = await t.runPacerd(['--check-config', '-c', path]);
      assert.equal(c.code, 0, c.stderr);
    },
  },
];
