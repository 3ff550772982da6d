// SPDX-License-Identifier: Apache-2.0
// The Grafana dashboard and the alert rules against a real scrape (issue 21):
// pacerd with the shared store (a real redis-server), one provider whose
// upstream refuses over 3 requests in flight and sends rate-limit headers
// (429s to absorb, limits to learn), one whose account has no quota; a real
// Prometheus scrapes it every second; then every query of
// conf/examples/grafana-dashboard.json, evaluated by that Prometheus, returns at
// least one series with a number (not NaN), and every metric the alert rules
// (conf/examples/prometheus-alerts.yaml) name is in the scrape.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, SLOW, freePort, request, startRedis, tryConnect, waitFor } from '../lib.mjs';
import { startPrometheus } from '../lib/prometheus.mjs';
import { chatBody, startPacerdFor } from '../load.mjs';

const DASHBOARD = path.join(ROOT, 'conf/examples/grafana-dashboard.json');
const ALERTS = path.join(ROOT, 'conf/examples/prometheus-alerts.yaml');

/** Every panel's queries, with Grafana's variables as the dashboard's defaults give them. */
function dashboardQueries() {
  const d = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
  const out = [];
  for (const p of d.panels) {
    for (const tg of p.targets ?? []) {
      out.push({
        panel: p.title,
        expr: tg.expr.replaceAll('$__rate_interval', '1m').replaceAll('$provider', '.*'),
      });
    }
  }
  return out;
}

const chat = (key) => ({
  method: 'POST',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-mock-delay-ms': '300' },
  body: JSON.stringify(chatBody()),
});

export const tests = [
  {
    name: 'every query of the Grafana dashboard returns data from a real Prometheus scrape after traffic; the alert rules name only exported metrics; a lane out of quota is counted',
    timeout_ms: 120000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 6000, concurrency: 3 } });
      const broke = await t.startMock({ config: { style: 'openai', quota_exhausted: true } });
      const redis = await startRedis(t);
      const aport = await freePort();
      const p = await startPacerdFor(t, mock, {
        admin: { listen: `127.0.0.1:${aport}` },
        providers: { broke: { upstream: broke.url } },
        store: { kind: 'redis', redis: { address: redis.address } },
      });
      await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
      const admin = `http://127.0.0.1:${aport}`;

      const { prom, query, alive } = await startPrometheus(t, aport);

      // Traffic after the first scrape, so that rate() sees it: 12 at once
      // against an upstream that takes 3 (429s, retried), then the account
      // without quota twice (the second is refused by pacerd itself).
      const rs = await Promise.all(Array.from({ length: 12 }, () => request(`${p.url}/v1/chat/completions`, { ...chat('sk-dash-1'), timeout_ms: 60000 })));
      assert.deepEqual(rs.map((r) => r.status), Array(12).fill(200));
      const q1 = await request(`${p.url}/broke/v1/chat/completions`, { ...chat('sk-dash-2'), timeout_ms: 20000 });
      assert.equal(q1.status, 429, q1.body.toString());
      const q2 = await request(`${p.url}/broke/v1/chat/completions`, { ...chat('sk-dash-2'), timeout_ms: 20000 });
      assert.equal(q2.status, 429);
      assert.equal(q2.headers['x-pacer-attempts'], '0', 'the second is answered by pacerd');

      const text = (await request(`${admin}/metrics`)).body.toString();
      assert.match(text, /^pacerd_lanes_refusing\{state="quota_exhausted"\} 1$/m);
      assert.match(text, /^pacerd_lanes_refusing\{state="daily_budget_exhausted"\} 0$/m);
      assert.match(text, /^pacerd_lane_rejected_total\{provider="broke",[^}]*reason="quota_exhausted"\} 1$/m);
      assert.match(text, /^pacerd_store_connected 1$/m);

      // Each query until it has a number (the scrapes after the traffic), 30 s at most in all.
      const queries = dashboardQueries();
      assert.ok(queries.length >= 20, `${queries.length} queries in the dashboard`);
      const deadline = Date.now() + 30000 * SLOW;
      const empty = [];
      for (const { panel, expr } of queries) {
        let got = null;
        for (;;) {
          alive();
          const r = await query(expr);
          got = r.filter((s) => Number.isFinite(Number(s.value[1])));
          if (got.length || Date.now() > deadline) break;
          await new Promise((res) => setTimeout(res, 500));
        }
        if (!got.length) empty.push(`${panel}: ${expr}`);
      }
      assert.deepEqual(empty, [], `queries without data:\n${empty.join('\n')}`);
      t.note(`${queries.length} dashboard queries, each with data`);

      // The alert rules: every metric they name is exported (by name, or as a histogram's _bucket).
      const names = [...new Set(fs.readFileSync(ALERTS, 'utf8').match(/pacerd_[a-z_]+/g))];
      const missing = names.filter((n) => !new RegExp(`^${n}[{ ]`, 'm').test(text));
      assert.deepEqual(missing, [], `alert rules name metrics /metrics lacks: ${missing.join(', ')}`);
      const ex = await prom.stop(15000);
      assert.ok(ex.code === 0 || ex.signal === 'SIGTERM', `prometheus exit ${JSON.stringify(ex)}`);
    },
  },
];
