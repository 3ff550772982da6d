// SPDX-License-Identifier: Apache-2.0
// What pacerd does to a request must never break one that works direct (issue 28,
// items 3, 6 and 7): a strict upstream (pacerd-mock's strict_fields: an unknown body
// member such as stream_options is a 422, as Mistral's API answered) gets the
// client's own bytes once it refused a rewritten body; side endpoints (count_tokens,
// model listings) charge no generation budget; Request-Timeout-Ms is the client's
// deadline like X-Stainless-Timeout. Each test has a mock and a pacerd of its own.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { SLOW, freePort, keyHash, request, streamRequest, tryConnect, waitFor } from '../lib.mjs';
import { chatBody, events, keyEntry, send, sleep, startPacerdFor } from '../load.mjs';

const key = 'sk-fidelity-0001';
const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

/** A strict mock, and pacerd in front of it with an admin port. over(mock) merges into its configuration. */
async function strictSetup(t, over) {
  const mock = await t.startMock();
  await mock.configure({ strict_fields: true });
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, { admin: { listen: `127.0.0.1:${aport}` }, ...over(mock) });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  const status = async () => JSON.parse((await request(`http://127.0.0.1:${aport}/status`)).body);
  return { mock, p, status };
}

function body(i, stream, extra = {}) {
  return JSON.stringify({ model: 'gpt-mock', stream, max_tokens: 16, messages: [{ role: 'user', content: `Say hello to fidelity test ${i}.` }], ...extra });
}

/** One call; its status and body bytes (a stream read to its end). */
async function call(url, b) {
  const r = await streamRequest(url, { body: b, headers: { ...auth, 'x-mock-chunks': '4' }, timeout_ms: 10000 });
  return { status: r.status, text: (await r.done).toString('latin1') };
}

const count422 = async (mock) => (await mock.stats()).responses?.['422'] ?? 0;

export const tests = [
  {
    name: 'strict upstream on a token-metered lane: every call, streamed or not, byte-identical to direct; one 422 at the mock, none at the client; /status says rewrites: off',
    timeout_ms: 30000,
    fn: async (t) => {
      const { mock, p, status } = await strictSetup(t, (m) => ({
        providers: { strict: { upstream: m.url, prefix: '/strict', dialect: 'none' } },
        plans: { metered: { max_tokens_per_minute: 1000000 } },
        keys: [{ provider: 'strict', key_sha256: keyHash(key), plan: 'metered' }],
      }));
      const proxied = `${p.url}/strict/v1/chat/completions`;
      const direct = `${mock.url}/v1/chat/completions`;
      // The first stream alone: pacerd's rewrite is refused, the client's bytes go again.
      const cases = [[0, true]];
      for (let i = 1; i <= 20; i++) cases.push([i, i % 2 === 0]);
      let same = 0, at422 = 0, ok = 0;
      const one = async ([i, stream]) => {
        const b = body(i, stream);
        const [a, d] = [await call(proxied, b), await call(direct, b)];
        if (a.status === 422) at422++;
        if (a.status === 200) ok++;
        if (a.status === d.status && a.text === d.text) same++;
        else console.log(`#   differs (${stream ? 'stream' : 'json'}): ${a.status} ${a.text.slice(0, 200)} | direct ${d.status}`);
      };
      await one(cases[0]);
      await Promise.all(cases.slice(1).map(one));
      const refused = await count422(mock);
      console.log(`#   strict upstream: ${ok}/${cases.length} calls 200, ${same} byte-identical to direct, ${at422} x 422 at the client, ${refused} x 422 at the mock`);
      assert.equal(at422, 0, 'a 422 reached the client');
      assert.equal(same, cases.length);
      assert.equal(refused, 1, 'the mock refused more than one rewritten body');
      const prov = (await status()).providers.strict;
      assert.equal(prov.rewrites, 'off', JSON.stringify(prov));
      assert.equal(prov.rewrites_off.refused_status, 422);
      assert.equal(prov.rewrites_off.resent_status, 200);
      assert.match(prov.rewrites_off.at, /^\d{4}-\d\d-\d\dT/);
      assert.equal(events(p, 'rewrites_off').length, 1, 'logged once');
      assert.equal((await status()).providers.openai.rewrites, 'on');
    },
  },
  {
    name: 'strict upstream: a client body the upstream refuses direct gets the same 422 through pacerd, and rewrites stay on (the rewrite was not the cause)',
    fn: async (t) => {
      const { mock, p, status } = await strictSetup(t, (m) => ({
        providers: { strict: { upstream: m.url, prefix: '/strict', dialect: 'none' } },
        plans: { metered: { max_tokens_per_minute: 1000000 } },
        keys: [{ provider: 'strict', key_sha256: keyHash(key), plan: 'metered' }],
      }));
      const b = body(1, true, { unknown_member: 1 });
      const a = await call(`${p.url}/strict/v1/chat/completions`, b);
      const d = await call(`${mock.url}/v1/chat/completions`, b);
      console.log(`#   client's own 422: through pacerd ${a.status}, direct ${d.status}, identical=${a.text === d.text}`);
      assert.equal(a.status, 422);
      assert.equal(a.text, d.text);
      assert.equal((await status()).providers.strict.rewrites, 'on');
      assert.equal(events(p, 'rewrites_off').length, 0);
    },
  },
  {
    name: 'mistral and openrouter send usage unasked: their streams are never rewritten (0 x 422 at a strict mock), /status rewrites: never',
    fn: async (t) => {
      const { mock, p, status } = await strictSetup(t, (m) => ({
        providers: { mistral: { upstream: m.url }, openrouter: { upstream: m.url } },
        plans: { metered: { max_tokens_per_minute: 1000000 } },
        keys: [{ provider: 'mistral', key_sha256: keyHash(key), plan: 'metered' }, { provider: 'openrouter', key_sha256: keyHash(key), plan: 'metered' }],
      }));
      for (const prefix of ['mistral', 'openrouter']) {
        const a = await call(`${p.url}/${prefix}/v1/chat/completions`, body(1, true));
        assert.equal(a.status, 200, `${prefix}: ${a.text}`);
      }
      const s = await status();
      console.log(`#   mistral/openrouter: ${await count422(mock)} x 422 at the mock; rewrites ${s.providers.mistral.rewrites}, ${s.providers.openrouter.rewrites}`);
      assert.equal(await count422(mock), 0);
      assert.equal(s.providers.mistral.rewrites, 'never');
      assert.equal(s.providers.openrouter.rewrites, 'never');
    },
  },
  {
    name: 'Request-Timeout-Ms: 2000 behind a 10-s queue: 503 deadline_unreachable at once, like X-Stainless-Timeout',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { plans: { slow: { max_requests_per_second: 1 } }, keys: [keyEntry(key, 'slow')] });
      const stop = new AbortController();
      const fillers = Array.from({ length: 10 }, () => send(`${p.url}/v1/chat/completions`, { headers: auth, body: chatBody(), timeout_ms: 20000, signal: stop.signal }));
      t.defer(async () => { stop.abort(); await Promise.all(fillers); });
      await sleep(200);
      const r = await send(`${p.url}/v1/chat/completions`, { headers: { ...auth, 'request-timeout-ms': '2000', 'x-test-mark': 'short' }, body: chatBody(), timeout_ms: 5000 });
      const ms = r.end - r.start;
      console.log(`#   Request-Timeout-Ms: ${r.status} in ${ms} ms, retry-after=${r.headers?.['retry-after']}`);
      assert.equal(r.status, 503, `${r.status} ${r.error ?? r.body}`);
      assert.equal(JSON.parse(r.body).error?.code, 'deadline_unreachable', r.body);
      assert.ok(ms <= 50 * SLOW, `answered after ${ms} ms`);
      const recs = await mock.requests();
      assert.equal(recs.filter((x) => x.headers.some(([n, v]) => n.toLowerCase() === 'x-test-mark' && v === 'short')).length, 0, 'a refused request reached the mock');
    },
  },
];

// ---- side endpoints (item 6) ----


const tight = { max_tokens_per_minute: 6000 }; // 100 tokens a second

async function sideSetup(t) {
  const mock = await t.startMock();
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, {
    admin: { listen: `127.0.0.1:${aport}` },
    plans: { tight },
    keys: [keyEntry(key, 'tight'), { provider: 'anthropic', key_sha256: keyHash(key), plan: 'tight' }],
  });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  return { mock, p, admin: `http://127.0.0.1:${aport}` };
}

const anth = { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' };
const longMessage = (n) => JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'count me '.repeat(n) }] });

tests.push(
  {
    name: 'side endpoints: 20 count_tokens and 20 GET /v1/models on a lane with a tight token plan are served without waiting, and the generation after them is not slowed',
    timeout_ms: 60000,
    fn: async (t) => {
      const { p, admin } = await sideSetup(t);
      const t0 = Date.now();
      const timed = async (f) => { const r = await f(); r.ms = Date.now() - t0; return r; };
      const countsP = Promise.all(Array.from({ length: 20 }, () => timed(() =>
        send(`${p.url}/anthropic/v1/messages/count_tokens`, { headers: anth, body: longMessage(250), timeout_ms: 5000 }))));
      const listsP = Promise.all(Array.from({ length: 20 }, () => timed(() =>
        send(`${p.url}/v1/models`, { method: 'GET', headers: { authorization: `Bearer ${key}` }, timeout_ms: 5000 }))));
      await sleep(50); // the side calls are in pacerd: the generation comes after them
      const t2 = Date.now();
      const gen = await send(`${p.url}/anthropic/v1/messages`, { headers: anth, body: longMessage(4), timeout_ms: 5000 });
      const tGen = Date.now() - t2;
      const [counts, lists] = [await countsP, await listsP];
      const tCount = Math.max(...counts.map((r) => r.ms));
      const tList = Math.max(...lists.map((r) => r.ms));
      const ok = (rs) => rs.filter((r) => r.status === 200).length;
      console.log(`#   side endpoints: count_tokens ${ok(counts)}/20 in ${tCount} ms, /v1/models ${ok(lists)}/20 in ${tList} ms, the generation after them ${gen.status} in ${tGen} ms`);
      assert.equal(ok(counts), 20, JSON.stringify(counts.find((r) => r.status !== 200)));
      assert.equal(ok(lists), 20);
      assert.equal(gen.status, 200, gen.body);
      assert.ok(tCount <= 1000 * SLOW, `count_tokens took ${tCount} ms`);
      assert.ok(tList <= 1000 * SLOW, `/v1/models took ${tList} ms`);
      assert.ok(tGen <= 500 * SLOW, `the generation waited ${tGen} ms behind side calls`);
      const lanes = JSON.parse((await request(`${admin}/status`)).body).lanes;
      const models = lanes.map((l) => `${l.provider}/${l.model}`).sort();
      assert.ok(models.includes('anthropic/:count_tokens'), models.join(' '));
      assert.ok(models.includes('openai/:models'), models.join(' '));
      const side = lanes.find((l) => l.model === ':count_tokens');
      assert.equal(side.counters.dispatched, 20);
      const genLane = lanes.find((l) => l.provider === 'anthropic' && l.model !== ':count_tokens');
      assert.equal(genLane.counters.dispatched, 1, 'a count_tokens call went through the generation lane');
    },
  },
  {
    name: 'side endpoints: an 8 MiB upload (…/files) on a tight token lane passes at once, byte for byte',
    timeout_ms: 60000,
    fn: async (t) => {
      const { p } = await sideSetup(t);
      const blob = crypto.randomBytes(8 << 20);
      const want = crypto.createHash('sha256').update(blob).digest('hex');
      const t0 = Date.now();
      const r = await new Promise((resolve, reject) => {
        const req = http.request(`${p.url}/echo/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream', 'content-length': blob.length }, agent: false }, (res) => {
          const h = crypto.createHash('sha256');
          let n = 0;
          res.on('data', (c) => { h.update(c); n += c.length; });
          res.on('end', () => resolve({ status: res.statusCode, sha: h.digest('hex'), n }));
          res.on('error', reject);
        });
        req.setTimeout(30000, () => req.destroy(new Error('timeout')));
        req.on('error', reject);
        req.end(blob);
      });
      const ms = Date.now() - t0;
      console.log(`#   upload: ${r.status}, ${r.n} bytes back in ${ms} ms, identical=${r.sha === want}`);
      assert.equal(r.status, 200);
      assert.equal(r.sha, want);
      assert.ok(ms <= 5000 * SLOW, `${ms} ms`);
    },
  },
);
