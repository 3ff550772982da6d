// SPDX-License-Identifier: Apache-2.0
// A gate far faster than the store's round trip, decided in Redis: make bench's
// pacerd+store plan (1,000,000 req/s, burst 1). Every "go" Redis granted was a
// round trip past its instant when it came back, older than half the gate's
// microsecond, so shared_stale dropped it and the lane asked again forever:
// nothing was answered (shared_permit_stale's floor, SHARED_STALE_MIN_MS).
import assert from 'node:assert/strict';
import { startRedis } from '../lib.mjs';
import { chatBody, runLoad, startPacerdWithAdmin, summarize } from '../load.mjs';

export const tests = [
  {
    name: 'a lane of 1,000,000 req/s (burst 1) decided in Redis answers 200 requests from 8 clients, each forwarded once',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const redis = await startRedis(t);
      const p = await startPacerdWithAdmin(t, mock, {
        plans: { default: { max_requests_per_second: 1000000, max_requests_per_minute: 60000000 } },
        store: { kind: 'redis', redis: { address: redis.address, key_prefix: 'itest:' } },
      });
      const run = await runLoad({
        base: p.url, n: 200, concurrency: 8, deadline_ms: 15000, timeout_ms: 5000,
        makeRequest: () => ({
          path: '/v1/chat/completions',
          headers: { authorization: 'Bearer sk-store-fast', 'content-type': 'application/json' },
          body: chatBody({ max_tokens: 8 }),
        }),
      });
      const s = summarize(run);
      t.note(`statuses ${JSON.stringify(s.statuses)}`);
      const ok = run.results.filter((r) => r && r.status === 200).length;
      assert.equal(ok, 200, `200 answered of 200 (${JSON.stringify(s.statuses)})`);
      // the mock records an exchange as its answer ends: the last few may come
      // a moment after the client read them
      const forwarded = async () => (await mock.requests()).filter((r) => r.uri === '/v1/chat/completions').length;
      const t1 = Date.now() + 3000;
      let n = await forwarded();
      while (n < 200 && Date.now() < t1) {
        await new Promise((r) => setTimeout(r, 100));
        n = await forwarded();
      }
      assert.equal(n, 200, 'each forwarded once');
      const st = await (await fetch(`${p.admin}/status`)).json();
      t.note(`store: ${JSON.stringify(st.store?.stale_permits ?? null)} stale permits, gates ${JSON.stringify(st.store?.state ?? null)}`);
    },
  },
];
