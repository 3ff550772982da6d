// SPDX-License-Identifier: Apache-2.0
// A fleet that counts itself (issue 30, item 2): every replica beats once a second
// into the store (a sorted set key_prefix + "replicas"), and while Redis is down each
// one paces at its plan's limits divided by the replicas alive at the last beats,
// with no store.redis.replicas kept by hand; that setting counts only for a replica
// that never heard a beat. /status store.replicas and store.fallback_divisor,
// /metrics pacerd_store_replicas and pacerd_store_fallback_divisor, and the
// store_unavailable / store_restored lines (fallback_divisor, replicas_from, gates)
// say so. Figures come from the mock's own records (t_mono_us: CLOCK_MONOTONIC).
import assert from 'node:assert/strict';
import { SLOW, keyHash, request, startRedis } from '../lib.mjs';
import { chatBody, events, runLoad, sleep, startPacerdWithAdmin, summarize } from '../load.mjs';

const PREFIX = 'itest:';

/** Now on the mock's record clock (CLOCK_MONOTONIC), in ms. */
const monoMs = () => Number(process.hrtime.bigint() / 1000n) / 1000;
/** Mock arrival times (ms), sorted, within [from, to). */
const arrivals = (recs, from = -Infinity, to = Infinity) => recs.map((r) => r.t_mono_us / 1000).filter((a) => a >= from && a < to).sort((a, b) => a - b);
/** (n − 1) / (last − first), per second. */
const rateOf = (at) => (at.length < 2 ? NaN : (at.length - 1) / ((at[at.length - 1] - at[0]) / 1000));

const chat = (key) => () => ({
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  body: chatBody({ max_tokens: 16 }),
});

/** The store section without store.redis.replicas unless `over` sets it. */
const storeConf = (redis, over = {}) => ({
  kind: 'redis',
  redis: { address: redis.address, key_prefix: PREFIX, timeout_ms: 50, on_error: 'local', ...over },
});

const status = async (p) => (await request(`${p.admin}/status`, { timeout_ms: 5000 })).json();
const metricValue = (text, name) => {
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
};
const storeLines = (p) => events(p, 'store_unavailable').concat(events(p, 'store_restored'), events(p, 'store_connected'))
  .map((l) => JSON.stringify(l)).join('\n');

export const tests = [
  {
    // a. Three replicas, 600 RPM each (burst 1), one key, store.redis.replicas not set
    // (1: before issue 30 each replica fell back to the whole limit, ~30 req/s in all).
    // The mock has no limits: what the replicas send is what they admit. 6 clients per
    // replica keep each lane busy. Redis is stopped 2 s in and restarted 6 s later.
    // While it is down the aggregate arrival rate, (n − 1) / (last − first) from 0.5 s
    // after the stop to the restart, stays <= 1.1 × 10 req/s; within 2 s of the restart
    // every replica's lane is decided in the store again (/status gates_decided), and
    // the aggregate stays <= 1.1 × 10 req/s after it. No request is lost. Light (10
    // requests a second): beside other light timing tests only under run.mjs --jobs.
    alone: 'light',
    name: 'a. Redis stopped under three replicas sharing 600 RPM, replicas not set: <= 1.1 × the limit while down, shared again within 2 s of its return',
    timeout_ms: 60000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const redis = await startRedis(t);
      const plan = { max_requests_per_minute: 600 };
      const ps = [];
      for (let i = 0; i < 3; i++) ps.push(await startPacerdWithAdmin(t, mock, { store: storeConf(redis), plans: { default: plan } }));
      const key = 'sk-fleet-a-0001';
      // Every replica has heard the three (a beat a second; a rise is believed at once).
      await Promise.all(ps.map((p, i) => waitFor3(p, i)));
      const m0 = (await request(`${ps[0].admin}/metrics`, { timeout_ms: 5000 })).text();
      assert.equal(metricValue(m0, 'pacerd_store_replicas'), 3, 'pacerd_store_replicas before the outage');
      assert.equal(metricValue(m0, 'pacerd_store_fallback_divisor'), 3, 'pacerd_store_fallback_divisor before the outage');

      const t0 = Date.now();
      const loads = ps.map((p) => runLoad({ base: p.url, n: 400, concurrency: 6, makeRequest: chat(key), deadline_ms: 13000, t0 }));
      await sleep(2000);
      await redis.stop();
      const K = monoMs();
      await sleep(6000);
      const down = await Promise.all(ps.map(status));
      await redis.restart();
      const R = monoMs();
      // Each replica's lane decided in the store again, and when.
      const back = await Promise.all(ps.map(async (p) => {
        const end = monoMs() + 5000 * SLOW;
        while (monoMs() < end) {
          const s = await status(p);
          const lane = s.lanes.find((l) => l.key === keyHash(key));
          if (s.store?.connected && lane?.gates_decided === 'shared') return monoMs() - R;
          await sleep(20);
        }
        return Infinity;
      }));
      const runs = await Promise.all(loads);
      const sums = runs.map(summarize);
      const recs = await mock.requests();
      const during = arrivals(recs, K + 500, R);
      const after = arrivals(recs, R + Math.max(...back.filter(Number.isFinite), 0) + 200);
      const outage = rateOf(during);
      const later = rateOf(after);
      const before = rateOf(arrivals(recs, -Infinity, K));
      const msg = `before the stop ${before.toFixed(2)} req/s; while down ${outage.toFixed(2)} req/s over ${during.length} arrivals; ` +
        `shared again ${back.map((b) => b.toFixed(0)).join('/')} ms after the restart; after it ${later.toFixed(2)} req/s over ${after.length} arrivals; ` +
        `/status while down ${JSON.stringify(down.map((s) => ({ connected: s.store.connected, replicas: s.store.replicas, divisor: s.store.fallback_divisor })))}`;
      t.note(`a: ${msg}`);
      console.log(`#   a: ${msg}`);
      const why = `\n${ps.map((p, i) => `replica ${i + 1}:\n${storeLines(p)}`).join('\n')}`;
      for (const [i, s] of sums.entries()) {
        assert.equal(s.ok, s.completed, `replica ${i + 1}: client statuses ${JSON.stringify(s.statuses)} ${s.firstErrors.join(' | ')}${why}`);
        assert.equal(runs[i].results.filter((r) => r.status === 0 && !/deadline/.test(r.error ?? '')).length, 0, `replica ${i + 1}: a request failed${why}`);
      }
      for (const [i, s] of down.entries()) {
        assert.equal(s.store.connected, false, `replica ${i + 1}'s /status while Redis is down: ${JSON.stringify(s.store)}`);
        assert.equal(s.store.fallback_divisor, 3, `replica ${i + 1}'s fallback divisor: ${JSON.stringify(s.store)}`);
      }
      for (const [i, p] of ps.entries()) {
        const u = events(p, 'store_unavailable');
        assert.ok(u.length === 1, `replica ${i + 1}: store_unavailable lines ${u.length}${why}`);
        assert.equal(u[0].fallback_divisor, 3, `replica ${i + 1}: ${JSON.stringify(u[0])}`);
        assert.equal(u[0].replicas_from, 'heartbeats', `replica ${i + 1}: ${JSON.stringify(u[0])}`);
        assert.equal(u[0].gates, 'local', `replica ${i + 1}: ${JSON.stringify(u[0])}`);
        const r = events(p, 'store_restored');
        assert.ok(r.length === 1 && r[0].gates === 'shared', `replica ${i + 1}: store_restored ${JSON.stringify(r)}${why}`);
      }
      assert.ok(during.length >= 30, `only ${during.length} arrivals while Redis was down: ${msg}`);
      assert.ok(outage <= 11, `aggregate ${outage.toFixed(2)} req/s while Redis was down (limit 10): ${msg}${why}`);
      assert.ok(back.every((b) => b <= 2000 * SLOW), `a replica was not deciding in the store again within 2 s of Redis' return: ${msg}${why}`);
      assert.ok(after.length >= 10, `only ${after.length} arrivals after the return: ${msg}`);
      assert.ok(later <= 11, `aggregate ${later.toFixed(2)} req/s after Redis returned (limit 10): ${msg}`);
      const lanes = await redis.keys(`${PREFIX}{openai:${keyHash(key)}*`);
      assert.ok(lanes.length >= 1, `no lane key in the restarted Redis: ${JSON.stringify(await redis.keys('*'))}`);
    },
  },
  {
    // b. A replica that never heard a beat (Redis down from its start) divides by
    // store.redis.replicas (4 here); once Redis answers, by the fleet it hears (1).
    name: 'b. no beat heard yet: the fallback divides by store.redis.replicas; the first beat replaces it',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const redis = await startRedis(t);
      await redis.stop();
      const p = await startPacerdWithAdmin(t, mock, { store: storeConf(redis, { replicas: 4 }), plans: { default: { max_requests_per_minute: 600 } } });
      const s0 = (await status(p)).store;
      assert.equal(s0.connected, false, JSON.stringify(s0));
      assert.equal(s0.replicas, 0, `no beat heard: ${JSON.stringify(s0)}`);
      assert.equal(s0.fallback_divisor, 4, `store.redis.replicas before any beat: ${JSON.stringify(s0)}`);
      const u = events(p, 'store_unavailable');
      assert.ok(u.length >= 1 && u[0].fallback_divisor === 4 && u[0].replicas_from === 'store.redis.replicas', JSON.stringify(u));
      await redis.restart();
      let s1;
      const end = Date.now() + 5000 * SLOW;
      while (Date.now() < end) {
        s1 = (await status(p)).store;
        if (s1.replicas === 1) break;
        await sleep(50);
      }
      assert.equal(s1.replicas, 1, `after Redis answered: ${JSON.stringify(s1)}`);
      assert.equal(s1.fallback_divisor, 1, `the fleet heard replaces store.redis.replicas: ${JSON.stringify(s1)}`);
      assert.ok(s1.heartbeats >= 1, JSON.stringify(s1));
      const m = (await request(`${p.admin}/metrics`, { timeout_ms: 5000 })).text();
      assert.equal(metricValue(m, 'pacerd_store_replicas'), 1);
      assert.equal(metricValue(m, 'pacerd_store_fallback_divisor'), 1);
      assert.ok(metricValue(m, 'pacerd_store_heartbeats_total') >= 1);
      const members = await redis.command('ZRANGE', `${PREFIX}replicas`, '0', '-1');
      assert.equal(members.length, 1, `the fleet's set: ${JSON.stringify(members)}`);
    },
  },
];

/** Waits until replica i's /status says three replicas are alive. */
async function waitFor3(p, i) {
  const end = Date.now() + 5000 * SLOW;
  let s;
  while (Date.now() < end) {
    s = (await status(p)).store;
    if (s?.replicas === 3) return;
    await sleep(50);
  }
  throw new Error(`replica ${i + 1} never counted 3 replicas: ${JSON.stringify(s)}`);
}
