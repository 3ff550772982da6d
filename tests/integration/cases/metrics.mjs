// SPDX-License-Identifier: Apache-2.0
// /metrics as a real Prometheus sees it (issue 9): promtool accepts the text,
// the per-provider histograms are cumulative and count every request once,
// admin.top_lanes caps the per-lane series, and a real Prometheus scrapes
// pacerd and answers queries on what it scraped.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { SLOW, freePort, request, sleep, tryConnect, waitFor } from '../lib.mjs';
import { startPrometheus } from '../lib/prometheus.mjs';
import { startPacerdFor } from '../load.mjs';

async function withAdmin(t, over = {}) {
  const mock = await t.startMock();
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, { admin: { listen: `127.0.0.1:${aport}`, ...over } });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  return { mock, p, aport, admin: `http://127.0.0.1:${aport}` };
}

async function scrape(admin) {
  const m = await request(`${admin}/metrics`);
  assert.equal(m.status, 200);
  return m.body.toString();
}

/** promtool check metrics on the text: exit 0 and nothing said. */
function promtoolCheck(text) {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30000 });
  assert.ok(!r.error, `promtool: ${r.error?.message} (install the prometheus package: scripts/install-deps.sh)`);
  assert.equal(r.stderr, '', `promtool complains:\n${r.stderr}`);
  assert.equal(r.stdout, '', `promtool complains:\n${r.stdout}`);
  assert.equal(r.status, 0, `promtool exit ${r.status}`);
}

/** The buckets (le → count), _sum and _count of one histogram series. */
function histogram(text, name, labels) {
  const buckets = [];
  let sum = null, count = null;
  for (const line of text.split('\n')) {
    let m = line.match(new RegExp(`^${name}_bucket\\{${labels},le="([^"]+)"\\} (\\S+)$`));
    if (m) buckets.push({ le: m[1] === '+Inf' ? Infinity : Number(m[1]), n: Number(m[2]) });
    m = line.match(new RegExp(`^${name}_sum\\{${labels}\\} (\\S+)$`));
    if (m) sum = Number(m[1]);
    m = line.match(new RegExp(`^${name}_count\\{${labels}\\} (\\S+)$`));
    if (m) count = Number(m[1]);
  }
  return { buckets, sum, count };
}

function assertCumulative(h, what) {
  assert.ok(h.buckets.length >= 2, `${what}: no buckets`);
  for (let i = 1; i < h.buckets.length; i++) {
    assert.ok(h.buckets[i].le > h.buckets[i - 1].le, `${what}: le not ascending`);
    assert.ok(h.buckets[i].n >= h.buckets[i - 1].n, `${what}: bucket ${h.buckets[i].le} < the one before`);
  }
  const inf = h.buckets[h.buckets.length - 1];
  assert.equal(inf.le, Infinity, `${what}: no +Inf bucket`);
  assert.equal(inf.n, h.count, `${what}: +Inf bucket != _count`);
}

export const tests = [
  {
    name: 'promtool check metrics passes; the histograms are cumulative and count each request once',
    fn: async (t) => {
      const { p, admin } = await withAdmin(t);
      promtoolCheck(await scrape(admin)); // before any traffic too
      const N = 6;
      for (let i = 0; i < N; i++) {
        const r = await request(`${p.url}/v1/models`, {
          headers: { authorization: 'Bearer sk-metrics-1', 'x-mock-delay-ms': i % 2 ? '120' : '0' },
        });
        assert.equal(r.status, 200);
      }
      const text = await scrape(admin);
      promtoolCheck(text);
      assert.ok(!/_ms[{ ]/.test(text), 'a family in milliseconds');
      for (const name of ['pacerd_queue_wait_seconds', 'pacerd_upstream_first_byte_seconds',
        'pacerd_request_duration_seconds', 'pacerd_request_attempts']) {
        assert.match(text, new RegExp(`^# TYPE ${name} histogram$`, 'm'));
        const h = histogram(text, name, 'provider="openai"');
        assertCumulative(h, name);
        assert.equal(h.count, N, `${name}_count`);
      }
      const d = histogram(text, 'pacerd_request_duration_seconds', 'provider="openai"');
      assert.ok(d.sum >= 0.3 && d.sum < 30, `duration sum ${d.sum}`);
      // Three requests took 120 ms upstream: at most three at or under 0.1 s.
      assert.ok(d.buckets.find((b) => b.le === 0.1).n <= 3, JSON.stringify(d.buckets));
      const a = histogram(text, 'pacerd_request_attempts', 'provider="openai"');
      assert.deepEqual(a.buckets.map((b) => b.le), [1, 2, 3, 5, 10, Infinity]);
      assert.equal(a.buckets[0].n, N); // one attempt each
      // Labelled by provider, never by key.
      assert.ok(!/pacerd_request_duration_seconds_count\{[^}]*key=/.test(text));
      assert.match(text, /^pacerd_tokens_reported_total\{provider="openai"\} \d+$/m);
      assert.match(text, /^pacerd_tokens_estimated_total\{provider="openai"\} \d+$/m);
      assert.match(text, /^# TYPE pacerd_lane_dispatch_delay_seconds gauge$/m);
    },
  },
  {
    name: 'admin.top_lanes: only that many lanes have pacerd_lane_* series, the most dispatched',
    fn: async (t) => {
      const { p, admin } = await withAdmin(t, { top_lanes: 3 });
      // Lane i gets i + 1 requests: lanes 3, 4 and 5 are the most dispatched.
      for (let i = 0; i < 6; i++)
        for (let j = 0; j <= i; j++)
          assert.equal((await request(`${p.url}/v1/models`, { headers: { authorization: `Bearer sk-top-${i}` } })).status, 200);
      const text = await scrape(admin);
      promtoolCheck(text);
      assert.match(text, /^pacerd_lanes 6$/m);
      assert.match(text, /^pacerd_lanes_exported 3$/m);
      const series = text.split('\n').filter((l) => l.startsWith('pacerd_lane_dispatched_total{'));
      assert.equal(series.length, 3, series.join('\n'));
      assert.deepEqual(series.map((l) => Number(l.split(' ')[1])).sort(), [4, 5, 6]);
      const keys = new Set(text.split('\n').filter((l) => l.startsWith('pacerd_lane_')).map((l) => l.match(/key="([^"]+)"/)[1]));
      assert.equal(keys.size, 3);
      // The histograms still count every request of the provider.
      assert.equal(histogram(text, 'pacerd_request_duration_seconds', 'provider="openai"').count, 21);
    },
  },
  {
    name: 'a real Prometheus scrapes /metrics: pacerd_up is 1, the request count and a median duration come back from its API',
    timeout_ms: 90000,
    fn: async (t) => {
      const { p, aport, admin } = await withAdmin(t);
      const { prom, query, alive, up } = await startPrometheus(t, aport);
      assert.equal(up[0].value[1], '1');
      assert.equal(up[0].metric.job, 'pacerd');

      // Traffic after the first scrape, so that rate() sees it.
      const N = 8;
      for (let i = 0; i < N; i++)
        assert.equal((await request(`${p.url}/v1/models`, { headers: { authorization: 'Bearer sk-prom', 'x-mock-delay-ms': '150' } })).status, 200);
      const sent = histogram(await scrape(admin), 'pacerd_request_duration_seconds', 'provider="openai"').count;
      assert.equal(sent, N);
      await waitFor(async () => {
        alive();
        const r = await query('pacerd_request_duration_seconds_count{provider="openai"}');
        return r.length && Number(r[0].value[1]) === N ? r : null;
      }, { timeout_ms: 20000 * SLOW, interval_ms: 250, what: 'prometheus to scrape the requests' });
      const median = await waitFor(async () => {
        alive();
        const r = await query('histogram_quantile(0.5, sum by (le) (rate(pacerd_request_duration_seconds_bucket{provider="openai"}[1m])))');
        const v = r.length ? Number(r[0].value[1]) : NaN;
        return Number.isFinite(v) ? v : null;
      }, { timeout_ms: 20000 * SLOW, interval_ms: 250, what: 'a median duration' });
      // Every request took 150 ms or a little more: the 0.25 s bucket's.
      assert.ok(median > 0.1 && median <= 0.25, `median ${median}`);
      const attempts = await query('sum(pacerd_request_attempts_count)');
      assert.equal(Number(attempts[0].value[1]), N);
      const ex = await prom.stop(15000);
      assert.ok(ex.code === 0 || ex.signal === 'SIGTERM', `prometheus exit ${JSON.stringify(ex)}`);
      await sleep(0);
    },
  },
];
