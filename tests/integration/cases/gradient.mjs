// SPDX-License-Identifier: Apache-2.0
// The latency controller (issue 29; sched/gradient.h) through the real binary, against the
// plain mock, which answers streams without rate-limit headers: a provider that says
// nothing. What it does against an engine that queues is engine_gradient.mjs's subject;
// here: when it engages (concurrency.mode), its slow start, what /status, /metrics and
// refusals make of it. Each test a few seconds.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { SLOW, keyHash, request, streamRequest } from '../lib.mjs';
import { chatBody, startPacerdWithAdmin } from '../load.mjs';

/** n streams at once on `key`: their first token `delay_ms` away (the mock waits that long
 * before its head), then `chunks` chunks `chunk_ms` apart; resolves with their statuses. */
function streams(base, key, n, { delay_ms = 0, chunks = 3, chunk_ms = 50 } = {}) {
  return Promise.all(Array.from({ length: n }, async () => {
    const r = await streamRequest(`${base}/v1/chat/completions`, {
      body: chatBody({ max_tokens: 16, stream: true }),
      headers: {
        authorization: `Bearer ${key}`, 'content-type': 'application/json',
        'x-mock-delay-ms': String(delay_ms), 'x-mock-chunks': String(chunks), 'x-mock-chunk-ms': String(chunk_ms),
      },
      timeout_ms: 20000,
    });
    await r.done;
    return r.status;
  }));
}

/** Arrival instants at the mock of `key`'s requests, ms after the first. */
async function arrivals(mock, key) {
  const auth = `Bearer ${key}`;
  const t = (await mock.requests())
    .filter((r) => r.headers.some(([n, v]) => n.toLowerCase() === 'authorization' && v === auth))
    .map((r) => r.t_mono_us / 1000).sort((a, b) => a - b);
  return t.map((x) => x - t[0]);
}

async function laneOf(p, key) {
  const st = JSON.parse((await request(`${p.admin}/status`)).body);
  const lane = st.lanes.find((l) => l.key === keyHash(key));
  assert.ok(lane, `no lane for ${key}`);
  return lane;
}

function promtoolCheck(text) {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30000 });
  assert.ok(!r.error, `promtool: ${r.error?.message}`);
  assert.equal(`${r.stdout}${r.stderr}`, '', 'promtool complains');
  assert.equal(r.status, 0);
}

export const tests = [
  {
    // slow_start 4; a first token 200 ms after each dispatch. 32 streams at once on a new lane of
    // a provider known to stream without rate-limit headers: 4 go, then one more per first token
    // that did not wait, within twice what is in flight: 8 from ~200 ms, 16 from ~400, 32 from
    // ~600, while the first streams still run (10 chunks 100 ms apart). Lower bounds on the
    // waves (a loaded machine only makes them later).
    name: 'a silent provider that streams: a new lane starts at concurrency.slow_start and doubles per round trip; /status and /metrics show the controller',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { plans: { default: { concurrency: { slow_start: 4 } } } });
      assert.deepEqual(await streams(p.url, 'sk-grad-warm', 1), [200]); // the provider streams, silent
      const key = 'sk-grad-slow-start';
      assert.deepEqual(new Set(await streams(p.url, key, 32, { delay_ms: 200, chunks: 10, chunk_ms: 100 })), new Set([200]));
      const at = await arrivals(mock, key);
      console.log(`#   arrivals (ms after the first): ${at.map((x) => x.toFixed(0)).join(' ')}`);
      assert.equal(at.length, 32);
      assert.ok(at[3] < 150 * SLOW, `the first 4 went together: ${at.slice(0, 4)}`);
      assert.ok(at[4] >= 180, `the 5th went before a first token came back: ${at[4]} ms`);
      assert.ok(at[8] >= 380, `the 9th went before the second round trip: ${at[8]} ms`);
      assert.ok(at[16] >= 580, `the 17th went before the third round trip: ${at[16]} ms`);

      const lane = await laneOf(p, key);
      const c = lane.concurrency;
      console.log(`#   /status concurrency: ${JSON.stringify(c)}`);
      assert.equal(c.mode, 'gradient');
      assert.equal(c.limit, lane.concurrency_limit);
      assert.ok(c.limit >= 32 && c.limit <= 64, `limit ${c.limit}`);
      assert.equal(c.slow_start, true);
      assert.equal(c.why, 'slow_start');
      assert.ok(c.first_token_ms >= 150 && c.first_token_ms_baseline >= 150, JSON.stringify(c));
      assert.ok(c.token_ms >= 50 && c.token_ms <= 200 * SLOW, `per token ${c.token_ms} ms (100 ms apart)`);
      assert.ok(c.server_queue >= 0 && c.server_queue < 0.5, `server queue ${c.server_queue}`);
      assert.equal(lane.state, 'open'); // AIMD's word: no refusal

      const text = (await request(`${p.admin}/metrics`)).body.toString();
      promtoolCheck(text);
      const series = `{provider="openai",key="${keyHash(key)}",model="gpt-mock"`;
      assert.ok(text.includes(`pacerd_lane_latency_controlled${series}} 1\n`), 'latency_controlled');
      const base = text.match(new RegExp(`^pacerd_lane_first_token_seconds\\${series},estimate="baseline"\\} (\\S+)$`, 'm'));
      assert.ok(base && Number(base[1]) >= 0.15 && Number(base[1]) <= 2 * SLOW, `first token baseline ${base?.[1]} s (200 ms away)`);
      assert.ok(text.includes(`pacerd_lane_token_latency_seconds${series},estimate="current"}`));
      assert.ok(text.includes(`pacerd_lane_server_queue${series}}`));
    },
  },
  {
    name: 'concurrency.mode: aimd: the same 32 streams go at once (open until a refusal), and /status says aimd',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { plans: { default: { concurrency: { mode: 'aimd', slow_start: 4 } } } });
      assert.deepEqual(await streams(p.url, 'sk-aimd-warm', 1), [200]);
      const key = 'sk-aimd-open';
      await streams(p.url, key, 32, { delay_ms: 200 });
      const at = await arrivals(mock, key);
      assert.ok(at[31] < 150 * SLOW, `all 32 at once: the last ${at[31]} ms after the first`);
      const lane = await laneOf(p, key);
      assert.deepEqual(lane.concurrency, { mode: 'aimd' });
      assert.equal(lane.concurrency_limit, 64);
    },
  },
  {
    // A provider that refuses (429 past 6 in flight per key, no rate-limit headers): the first
    // refusal closes AIMD at half what was in flight, and auto leaves the lane to AIMD.
    name: 'concurrency.mode auto: a refusal hands a silent lane to AIMD; every client is answered 200',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { concurrency: 6, headers: false, retry_after_s: 1 } });
      const p = await startPacerdWithAdmin(t, mock);
      assert.deepEqual(await streams(p.url, 'sk-ref-warm', 1), [200]);
      const key = 'sk-ref-lane';
      const before = await laneOf(p, 'sk-ref-warm');
      assert.equal(before.concurrency.mode, 'gradient');
      assert.deepEqual(new Set(await streams(p.url, key, 12, { chunk_ms: 100 })), new Set([200]));
      const lane = await laneOf(p, key);
      assert.ok(lane.counters.capacity_signals >= 1, JSON.stringify(lane.counters));
      assert.deepEqual(lane.concurrency, { mode: 'aimd' });
      assert.ok(lane.concurrency_limit <= 6, `limit ${lane.concurrency_limit}`);
    },
  },
  {
    // A provider with rate-limit headers is AIMD's under auto; mode gradient reads latency there too.
    name: 'concurrency.mode gradient: a provider with rate-limit headers gets the latency controller too (auto: not)',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 100000 } });
      const p = await startPacerdWithAdmin(t, mock, {
        plans: { g: { concurrency: { mode: 'gradient', slow_start: 8 } } },
        keys: [{ provider: 'openai', key_sha256: keyHash('sk-mode-gradient'), plan: 'g' }],
      });
      await streams(p.url, 'sk-mode-auto', 2);
      await streams(p.url, 'sk-mode-gradient', 2);
      assert.equal((await laneOf(p, 'sk-mode-auto')).concurrency.mode, 'aimd');
      const g = await laneOf(p, 'sk-mode-gradient');
      assert.equal(g.concurrency.mode, 'gradient');
      assert.equal(g.concurrency.limit, 8);
    },
  },
];
