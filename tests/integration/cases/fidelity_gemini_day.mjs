// SPDX-License-Identifier: Apache-2.0
// Gemini's per-day quota (issue 28, item 4; PROVIDERS.md §5, §11): a 429
// RESOURCE_EXHAUSTED whose QuotaFailure names GenerateRequestsPerDayPerProjectPerModel
// (quotaValue: the day's requests) and whose RetryInfo.retryDelay is the time until the
// day ends. pacerd-mock keeps such a budget (tests/mock/README.md: `rpd` in a
// model_limits entry, `day_ms` the length of its day, here a few seconds so that the
// test sees the reset). Told nothing, pacerd must take the first refusal as the quota of
// the day: the lane's quota is out until the reset, clients are answered without an
// upstream call, and the lane resumes when the day ends.
import assert from 'node:assert/strict';
import { SLOW, request, sleep } from '../lib.mjs';
import { logDigest, send, startPacerdWithAdmin } from '../load.mjs';

// A day of 12 s, the lane resuming within 1 s of its reset: beside other files under
// run.mjs --jobs, each test in a process of its own.
export const split = true;

const MODEL = 'gemini-day';
const PER_DAY = 20;
/* A day longer than pacerd's quota_probe_s (10 s): the reset, not the probe interval,
 * decides when the lane resumes. */
const DAY_MS = 12000;

const OTHER = 'gemini-other'; // a model of the same key without a daily quota

const call = (base, key, model = MODEL) => send(`${base}/gemini/v1beta/models/${model}:generateContent`, {
  headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
  body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Say hello to the per-day quota test.' }] }] }),
  timeout_ms: 20000,
});

async function laneOf(p) {
  const r = await request(`${p.admin}/status`);
  return JSON.parse(r.body.toString()).lanes.find((l) => l.provider === 'gemini' && l.model === MODEL);
}

export const tests = [
  {
    // The mock alone: rpd counts the requests of each day of day_ms; past them, the
    // style's 429 (Gemini: QuotaFailure with the PerDay quotaId and its quotaValue,
    // RetryInfo.retryDelay the time to the day's end; OpenAI: "requests per day (RPD)"
    // with retry-after), and the next day starts afresh.
    name: 'pacerd-mock: rpd per model and day_ms: the quota of a day, its 429 in the Gemini and OpenAI dialects, and the next day',
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'gemini', day_ms: 1500, model_limits: [{ models: ['g-day'], rpd: 2 }] } });
      const g = () => send(`${mock.url}/v1beta/models/g-day:generateContent`, { headers: { 'x-goog-api-key': 'k-day', 'content-type': 'application/json' }, body: '{}', timeout_ms: 5000 });
      assert.deepEqual([(await g()).status, (await g()).status], [200, 200]);
      const r = await g();
      assert.equal(r.status, 429);
      assert.equal(r.headers['retry-after'], undefined, 'Gemini: no retry-after header');
      const e = JSON.parse(r.body).error;
      assert.equal(e.status, 'RESOURCE_EXHAUSTED');
      const v = e.details.find((d) => d['@type'].endsWith('QuotaFailure')).violations[0];
      assert.equal(v.quotaId, 'GenerateRequestsPerDayPerProjectPerModel');
      assert.equal(v.quotaValue, '2');
      assert.equal(v.quotaDimensions.model, 'g-day');
      const delay = parseFloat(e.details.find((d) => d['@type'].endsWith('RetryInfo')).retryDelay);
      assert.ok(delay > 0 && delay <= 1.5, `retryDelay ${delay} s: the rest of the day`);
      await sleep(delay * 1000 + 20);
      assert.equal((await g()).status, 200, 'a new day');
      const st = await mock.stats();
      assert.deepEqual([st.models['g-day'].passed, st.models['g-day'].rate_limited, st.window_violations], [3, 1, 0]);
      await mock.configure({ style: 'openai', day_ms: 60000, rpd: 1 });
      const o = () => send(`${mock.url}/v1/chat/completions`, { headers: { authorization: 'Bearer sk-day', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-mock', messages: [] }), timeout_ms: 5000 });
      assert.equal((await o()).status, 200);
      const refused = await o();
      assert.equal(refused.status, 429);
      assert.match(JSON.parse(refused.body).error.message, /on requests per day \(RPD\): Limit 1, Used 1, Requested 1\. Please try again in /);
      assert.ok(Number(refused.headers['retry-after']) >= 59 && Number(refused.headers['retry-after']) <= 60, `retry-after ${refused.headers['retry-after']}`);
    },
  },
  {
    name: `Gemini per-day quota (${PER_DAY} requests a day of ${DAY_MS / 1000} s), told nothing: after the first refusal the lane's quota is out, clients are answered without upstream calls, and the lane resumes after the reset`,
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'gemini', window_grace_ms: 5, day_ms: DAY_MS, model_limits: [{ models: [MODEL], rpd: PER_DAY }, { models: [OTHER], rpm: 6000 }] } });
      const p = await startPacerdWithAdmin(t, mock, { providers: { gemini: { upstream: mock.url } } });
      const key = 'AIza-gemini-per-day';
      const t0 = Date.now();
      const results = [];
      let laneOut = null;
      // Two clients, each sending its next call when the last is answered (after a
      // refusal, 100 ms later), until 1.5 days have passed.
      const client = async () => {
        while (Date.now() - t0 < 1.5 * DAY_MS) {
          const r = await call(p.url, key);
          results.push({ at: Date.now() - t0, status: r.status, body: r.body, headers: r.headers });
          if (r.status !== 200) {
            if (laneOut === null && r.status === 429) laneOut = await laneOf(p);
            await sleep(100);
          }
        }
      };
      // And a client of another model of the same key, whose budget is not the day's.
      const others = [];
      const other = async () => {
        while (Date.now() - t0 < 1.5 * DAY_MS) {
          others.push((await call(p.url, key, OTHER)).status);
          await sleep(250);
        }
      };
      await Promise.all([client(), client(), other()]);
      const st = await mock.stats();
      const m = st.models[MODEL] ?? {};
      // The mock's day began at its start (its config): t_ms says which day an arrival is in.
      const arrivals = (await mock.requests()).filter((r) => r.uri.includes(MODEL)).map((r) => r.t_ms);
      const inDay1 = arrivals.filter((x) => x < DAY_MS);
      const firstRefused = inDay1[PER_DAY]; // the 21st arrival met the spent day
      const resumed = arrivals.find((x) => x >= DAY_MS);
      const ok = results.filter((r) => r.status === 200).length;
      const byPacerd = results.length - ok - (m.rate_limited ?? 0);
      const sample = results.find((r) => r.status !== 200);
      console.log(`# Gemini per-day: mock ${m.passed ?? 0} passed, ${m.rate_limited ?? 0} refused (day 1: ${inDay1.length - PER_DAY}), window_violations ${st.window_violations}; ` +
        `clients ${ok} × 200, ${results.length - ok} refused (${byPacerd} by pacerd without an upstream call); ` +
        `first refusal at ${firstRefused} ms, lane ${laneOut?.state} hold_ms ${laneOut?.hold_ms}; resumed at ${resumed} ms (the day ends at ${DAY_MS})`);
      console.log(`#   ${OTHER}: ${others.filter((x) => x === 200).length} of ${others.length} × 200`);
      console.log(`#   a refusal the client got: ${sample?.status} x-should-retry ${sample?.headers?.['x-should-retry']} ${sample?.body?.slice(0, 160)}`);
      const why = `\n${logDigest(p, ['retry', 'quota_exhausted', 'quota_restored', 'limit_learned'])}`;
      assert.ok(laneOut !== null, `no refusal reached a client${why}`);
      assert.equal(laneOut.state, 'quota_exhausted', `the lane at the first refusal: ${JSON.stringify(laneOut)}${why}`);
      // The hold is the retryDelay: until the day ends (read a little after the refusal).
      const left = DAY_MS - firstRefused;
      assert.ok(laneOut.hold_ms <= left + 50 && laneOut.hold_ms >= left - 1000 * SLOW, `hold_ms ${laneOut.hold_ms}, the day ends in ${left} ms${why}`);
      // Day 1: the quota's requests pass, then at most 2 refusals reach the mock (what
      // was in flight), none inside the retryDelay.
      assert.ok(inDay1.length >= PER_DAY + 1 && inDay1.length <= PER_DAY + 2, `${inDay1.length - PER_DAY} refusals reached the mock on day 1${why}`);
      assert.equal(st.window_violations, 0, `${st.window_violations} request(s) sent inside a retryDelay${why}`);
      assert.ok(byPacerd >= 20, `pacerd answered only ${byPacerd} refusals itself${why}`);
      assert.equal(sample?.status, 429, 'the day\'s refusal reaches the client as a 429');
      // Day 2: the lane resumes at the reset, not later, and spends the new day's quota.
      assert.ok(resumed !== undefined && resumed <= DAY_MS + 1000 * SLOW, `the lane resumed at ${resumed} ms, the day ended at ${DAY_MS}${why}`);
      assert.equal(m.passed, 2 * PER_DAY, `passed at the mock: ${m.passed}${why}`);
      assert.ok((m.rate_limited ?? 0) <= 4, `${m.rate_limited} refusals reached the mock in 1.5 days (at most 2 a day)${why}`);
      // The day's quota is the model's: the other model of the key never waits for it.
      assert.ok(others.length >= 20 && others.every((x) => x === 200), `${OTHER}: ${JSON.stringify(others)}${why}`);
    },
  },
];
