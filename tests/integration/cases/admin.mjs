// SPDX-License-Identifier: Apache-2.0
// The admin listener (DESIGN §7): health, readiness, /status, /metrics, /reload,
// and the bearer token.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { SLOW, freePort, keyHash, request, sleep, tryConnect, waitFor } from '../lib.mjs';
import { startPacerdFor } from '../load.mjs';

async function withAdmin(t, over = {}) {
  const mock = await t.startMock();
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, { admin: { listen: `127.0.0.1:${aport}`, ...over } });
  // The admin port is bound right after the main one (slowly under valgrind).
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  return { mock, p, admin: `http://127.0.0.1:${aport}` };
}

export const tests = [
  {
    name: 'healthz, readyz, /status per lane (hash prefix, never the key), /metrics in Prometheus text',
    fn: async (t) => {
      const { p, admin } = await withAdmin(t);
      const h = await request(`${admin}/healthz`);
      assert.equal(h.status, 200);
      assert.deepEqual(JSON.parse(h.body), { status: 'ok' });
      assert.equal((await request(`${admin}/readyz`)).status, 200);

      const key = 'sk-admin-secret-0001';
      for (let i = 0; i < 3; i++)
        assert.equal((await request(`${p.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
      const s = await request(`${admin}/status`);
      assert.equal(s.status, 200);
      assert.match(s.headers['content-type'], /application\/json/);
      assert.ok(!s.body.includes(key), '/status shows the API key');
      const st = JSON.parse(s.body);
      const lane = st.lanes.find((l) => l.key === keyHash(key));
      assert.ok(lane, `no lane for ${keyHash(key)} in ${s.body}`);
      assert.equal(lane.provider, 'openai');
      assert.equal(lane.plan, 'default');
      assert.equal(lane.counters.dispatched, 3);
      assert.equal(lane.counters.succeeded, 3);
      assert.equal(lane.in_flight, 0);
      assert.equal(lane.queue_depth, 0);
      // open (no capacity signal yet), by a slow start: the mock sends no rate-limit
      // headers, and three requests one after the other never fill the 4 it starts at
      assert.equal(lane.concurrency_limit, 4);
      assert.equal(lane.state, 'open');
      assert.equal(lane.model, ':models'); // GET /v1/models is a side endpoint: its own lane (issue 28 item 6)
      assert.equal(lane.scope_kind, 'key');
      assert.equal(st.draining, false);
      assert.ok(st.responses['2xx'] >= 3);

      const m = await request(`${admin}/metrics`);
      m.body = m.body.toString();
      assert.equal(m.status, 200);
      assert.match(m.headers['content-type'], /^text\/plain/);
      assert.match(m.body, /^pacerd_up 1$/m);
      assert.match(m.body, /^# TYPE pacerd_lane_dispatched_total counter$/m);
      assert.ok(m.body.includes(`pacerd_lane_dispatched_total{provider="openai",key="${keyHash(key)}",model=":models"} 3\n`), m.body);
      assert.match(m.body, /^pacerd_responses_total\{class="2xx"\} [1-9]\d*$/m);
      assert.ok(!m.body.includes(key), '/metrics shows the API key');

      assert.equal((await request(`${admin}/nope`)).status, 404);
      assert.equal((await request(`${admin}/status`, { method: 'POST', body: '' })).status, 405);
    },
  },
  {
    name: 'admin.token: requests without the bearer token get 401',
    fn: async (t) => {
      const { admin } = await withAdmin(t, { token: 's3cret-admin' });
      const none = await request(`${admin}/status`);
      assert.equal(none.status, 401);
      assert.equal(JSON.parse(none.body).error.code, 'unauthorized');
      assert.equal((await request(`${admin}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status, 401);
      assert.equal((await request(`${admin}/status`, { headers: { authorization: 'Bearer s3cret-admin' } })).status, 200);
    },
  },
  {
    name: 'POST /reload: an invalid file gives 400 with file:line:column and keeps running; a valid one reloads',
    fn: async (t) => {
      const { p, admin } = await withAdmin(t);
      const good = fs.readFileSync(p.configFile, 'utf8');
      fs.writeFileSync(p.configFile, `${good}\nbogus_key: 1\n`);
      const bad = await request(`${admin}/reload`, { method: 'POST', body: '' });
      assert.equal(bad.status, 400);
      const err = JSON.parse(bad.body).error;
      assert.equal(err.code, 'invalid_config');
      assert.match(err.message, /pacerd-\d+\.yaml:\d+:\d+: .*bogus_key/);
      assert.equal((await request(`${p.url}/v1/models`)).status, 200);
      fs.writeFileSync(p.configFile, good);
      const ok = await request(`${admin}/reload`, { method: 'POST', body: '' });
      assert.equal(ok.status, 200);
      await waitFor(() => p.logs().some((l) => l.event === 'config_reloaded'), { what: 'config_reloaded' });
    },
  },
  {
    name: 'readyz says 503 while draining; the admin port stays up until exit',
    fn: async (t) => {
      const { p, admin } = await withAdmin(t);
      const slow = request(`${p.url}/v1/models`, { headers: { 'x-mock-delay-ms': '1500' }, timeout_ms: 10000 * SLOW });
      await sleep(200);
      p.signal('SIGTERM');
      await sleep(200);
      const r = await request(`${admin}/readyz`);
      assert.equal(r.status, 503);
      assert.deepEqual(JSON.parse(r.body), { status: 'draining' });
      assert.equal((await slow).status, 200);
    },
  },
];
