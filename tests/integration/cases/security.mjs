// SPDX-License-Identifier: Apache-2.0
// Security (issue 10): API keys never leave pacerd except toward their upstream; the
// admin token guards every admin path; pacerd is never an open proxy. Each test has a
// mock and a pacerd of its own.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { SLOW, freePort, keyHash, rawHttp, request, runPacerd, sleep, streamRequest, toYaml, tryConnect, waitFor } from '../lib.mjs';
import { chatBody, keyEntry, send, startPacerdFor } from '../load.mjs';

/** A pacerd whose openai and anthropic providers point at `mock`, with an admin port. */
async function pacerdWithAdmin(t, mock, over = {}) {
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, {
    providers: { anthropic: { upstream: mock.url } },
    ...over,
    admin: { listen: `127.0.0.1:${aport}`, ...(over.admin ?? {}) },
  });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  p.admin = `http://127.0.0.1:${aport}`;
  return p;
}

/** The forms of a key that must never be written: itself, its base64 (both alphabets), its first 20 characters. */
function needles(key) {
  return [key, Buffer.from(key).toString('base64'), Buffer.from(key).toString('base64url'), key.slice(0, 20)];
}

function assertNoKey(where, text, keys) {
  for (const k of keys)
    for (const n of needles(k))
      assert.ok(!text.includes(n), `${where} contains '${n}' (a form of an API key): …${text.slice(Math.max(0, text.indexOf(n) - 200), text.indexOf(n) + 100)}…`);
}

/** Everything of a response as text: status line, every header, the body. */
const wire = (r) => `${r.status} ${JSON.stringify(r.headers ?? {})} ${r.rawHeaders ? JSON.stringify(r.rawHeaders) : ''} ${r.raw ? r.raw.toString('latin1') : ''} ${r.body ?? ''} ${r.error ?? ''}`;

const ADMIN_TOKEN = 'adm-Tok3n-4b1e-92f0-security';

export const tests = [
  {
    name: 'an API key (bearer and x-api-key) appears in no log line, no answer of pacerd, no /status, no /metrics, over every path',
    timeout_ms: 40000,
    fn: async (t) => {
      const rnd = crypto.randomBytes(16).toString('hex');
      const K1 = `sk-SECRET-canary-${rnd}-openai`; // Authorization: Bearer
      const K2 = `sk-ant-SECRET-canary-${rnd}-anthropic`; // x-api-key
      const keys = [K1, K2];
      const mock = await t.startMock();
      const retry = { max_attempts: 2, initial_delay_ms: 50, max_delay_ms: 200, deadline_s: 2 };
      const p = await pacerdWithAdmin(t, mock, {
        log: { level: 'debug' },
        admin: { token: ADMIN_TOKEN },
        plans: {
          default: { retry, quota_probe_s: 1 },
          // K2's lane: one at a time, 1 req/s, a queue of 2 (queue_full, deadline_unreachable).
          tight: { retry, max_requests_per_second: 1, max_concurrent: 1, queue: { max_depth: 2 } },
        },
        keys: [{ ...keyEntry(K2, 'tight'), provider: 'anthropic' }],
      });
      const answers = []; // every answer the client saw: [label, wire text]
      const seen = (label, r) => { answers.push([label, wire(r), r.status]); return r; };
      const oai = (extra = {}, body = chatBody({ max_tokens: 4 }), path = '/v1/chat/completions') =>
        send(`${p.url}${path}`, { headers: { authorization: `Bearer ${K1}`, 'content-type': 'application/json', ...extra }, body, timeout_ms: 15000 });
      const antBody = (stream = false) => JSON.stringify({ model: 'claude-mock', max_tokens: 4, stream, messages: [{ role: 'user', content: 'hi' }] });
      const ant = (extra = {}, body = antBody()) =>
        send(`${p.url}/anthropic/v1/messages`, { headers: { 'x-api-key': K2, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', ...extra }, body, timeout_ms: 15000 });

      // Success, both keys; a key in the query string as well.
      assert.equal(seen('ok openai', await oai()).status, 200);
      assert.equal(seen('ok anthropic', await ant()).status, 200);
      assert.equal(seen('query key', await send(`${p.url}/v1/models?key=${K1}`, { method: 'GET', headers: { authorization: `Bearer ${K1}` } })).status, 200);
      // A 4xx from the upstream; a body the upstream rejects that carries the key itself
      // (not JSON: pacerd's token estimate must not quote it).
      assert.equal(seen('upstream 400', await oai({ 'x-mock-status': '400' })).status, 400);
      assert.equal(seen('rejected body', await oai({ 'x-mock-status': '422' }, `{"model":"gpt-mock","messages":[{"role":"user","content":"${K1}"}`)).status, 422);
      assert.equal(seen('upstream 401', await ant({ 'x-mock-status': '401', 'x-mock-error-type': 'authentication_error' })).status, 401);
      // 5xx and 429, retried once then relayed; a reset before the headers: 502.
      assert.equal(seen('upstream 500', await oai({ 'x-mock-status': '500' })).status, 500);
      { const r = seen('upstream 429', await oai({ 'x-mock-status': '429', 'x-mock-header': 'retry-after: 1' })); assert.equal(r.status, 429, `${r.error} ${r.end - r.start} ms`); }
      assert.equal(seen('upstream reset', await oai({ 'x-mock-reset': 'headers' })).status, 502);
      // Streams, both dialects.
      const s1 = await oai({}, chatBody({ stream: true }));
      assert.equal(seen('stream openai', s1).status, 200);
      assert.match(s1.body, /\[DONE\]/);
      assert.equal(seen('stream anthropic', await ant({}, antBody(true))).status, 200);
      // Intake's own refusals with a key on the request.
      assert.equal(seen('priority', await oai({ 'x-pacer-priority': 'high' })).status, 400);
      seen('foreign host', await rawHttp(p.port, `POST http://evil.example/v1/chat/completions HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ${K1}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`));
      seen('connect', await rawHttp(p.port, `CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\nProxy-Authorization: Basic ${Buffer.from(`u:${K1}`).toString('base64')}\r\n\r\n`));
      seen('smuggling', await rawHttp(p.port, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${K1}\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`));
      // A reload (SIGHUP) while a request is in flight, and one through POST /reload.
      const during = oai({ 'x-mock-delay-ms': '600' });
      await waitFor(async () => (await mock.stats()).in_flight === 1, { timeout_ms: 3000 * SLOW, what: 'a request in flight' });
      p.signal('SIGHUP');
      assert.equal(seen('during reload', await during).status, 200);
      assert.equal((await request(`${p.admin}/reload`, { method: 'POST', body: '', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status, 200);
      await waitFor(() => p.logs().filter((l) => l.event === 'config_reloaded').length >= 2, { timeout_ms: 3000 * SLOW, what: 'two config_reloaded' });
      // queue_full and deadline_unreachable on K2's tight lane: one in flight (held 1.5 s), one queued,
      // one whose deadline is before its turn, one more queued, one refused.
      const a1 = ant({ 'x-mock-delay-ms': '1500' });
      await waitFor(async () => (await mock.stats()).in_flight === 1, { timeout_ms: 3000 * SLOW, what: 'K2 in flight' });
      const a2 = ant();
      await sleep(100);
      const late = seen('deadline', await ant({ 'x-pacer-timeout-ms': '100' }));
      assert.equal(late.status, 503, late.body);
      assert.equal(JSON.parse(late.body).error.code, 'deadline_unreachable');
      const a3 = ant();
      await sleep(100);
      const full = seen('queue_full', await ant());
      assert.equal(full.status, 503, full.body);
      assert.equal(JSON.parse(full.body).error.code, 'queue_full');
      // A client that leaves while queued.
      const gone = new AbortController();
      const a4 = send(`${p.url}/anthropic/v1/messages`, { headers: { 'x-api-key': K2, 'content-type': 'application/json' }, body: antBody(), signal: gone.signal });
      await sleep(50);
      gone.abort();
      for (const [i, r] of (await Promise.all([a1, a2, a3])).entries()) seen(`queued ${i}`, r);
      await a4;
      // A client that leaves in the middle of a stream.
      const st = await streamRequest(`${p.url}/v1/chat/completions`, {
        headers: { authorization: `Bearer ${K1}`, 'content-type': 'application/json', 'x-mock-chunks': '20', 'x-mock-chunk-ms': '100' },
        body: chatBody({ stream: true }),
      });
      seen('left stream', { status: st.status, headers: st.headers });
      await sleep(150);
      st.req.destroy();
      await waitFor(async () => (await mock.stats()).streams_aborted >= 1, { timeout_ms: 3000 * SLOW, what: 'the stream aborted upstream' });
      // The quota runs out: the upstream's 429 insufficient_quota, then pacerd's own refusal.
      await mock.configure({ quota_exhausted: true });
      seen('quota upstream', await oai());
      seen('quota pacerd', await oai());
      await mock.configure({});
      // The key offered as the admin token.
      const wrongAdmin = seen('admin with the key', await request(`${p.admin}/status`, { headers: { authorization: `Bearer ${K1}` } }));
      assert.equal(wrongAdmin.status, 401);

      // /status and /metrics: the hash prefix, never the key.
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const status = await request(`${p.admin}/status`, { headers: auth });
      const metrics = await request(`${p.admin}/metrics`, { headers: auth });
      assert.equal(status.status, 200);
      assert.equal(metrics.status, 200);
      assert.ok(status.text().includes(`"key":"${keyHash(K1)}"`), `no lane ${keyHash(K1)} in /status: the test looks in the wrong place`);
      assert.ok(status.text().includes(`"key":"${keyHash(K2)}"`), `no lane ${keyHash(K2)} in /status`);
      assert.ok(metrics.text().includes(`key="${keyHash(K1)}"`), `no series for ${keyHash(K1)} in /metrics`);
      assertNoKey('/status', wire(status), keys);
      assertNoKey('/metrics', wire(metrics), keys);
      for (const [label, text] of answers) assertNoKey(`the answer '${label}'`, text, keys);

      await p.stop();
      const log = p.stderr();
      const lines = p.logs();
      assert.ok(lines.some((l) => l.event === 'request' && l.key === keyHash(K1)), 'no request line names K1 by its hash prefix');
      assert.ok(lines.some((l) => l.event === 'queueing'), 'debug lines were written (log.level: debug)');
      for (const ev of ['retry', 'config_reloaded', 'rejected', 'quota_exhausted'])
        assert.ok(lines.some((l) => l.event === ev), `no '${ev}' line: a path was not taken`);
      assertNoKey('the log', log, keys);
      assert.ok(!log.includes('canary'), 'the log contains the canary');
      t.note(answers.map(([l, , s]) => `${l} ${s}`).join(', '));
      t.note(`${answers.length} answers, ${lines.length} log lines, /status ${status.body.length} B, /metrics ${metrics.body.length} B: no form of either key`);
    },
  },
  {
    name: 'admin.token guards every admin path: 401 without it, wrong, a prefix, plus a character, another scheme; 200 with it (as the Basic password: reading paths only)',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await pacerdWithAdmin(t, mock, { admin: { token: ADMIN_TOKEN } });
      const bad = [
        undefined, 'Bearer', 'Bearer ', 'Bearer wrong', `Bearer ${ADMIN_TOKEN.slice(0, -1)}`, `Bearer ${ADMIN_TOKEN.slice(0, 4)}`,
        `Bearer ${ADMIN_TOKEN}x`, `Bearer ${ADMIN_TOKEN} x`, `Bearer x${ADMIN_TOKEN}`, ADMIN_TOKEN, `Basic ${Buffer.from(`u:${ADMIN_TOKEN}x`).toString('base64')}`,
        `Bearer ${ADMIN_TOKEN.toUpperCase()}`, `Digest ${ADMIN_TOKEN}`,
      ];
      const basicToken = `Basic ${Buffer.from(`u:${ADMIN_TOKEN}`).toString('base64')}`;
      const paths = [['GET', '/healthz'], ['GET', '/readyz'], ['GET', '/status'], ['GET', '/metrics'], ['POST', '/reload'], ['GET', '/nope'], ['GET', '/']];
      let n = 0;
      for (const [method, path] of paths) {
        for (const a of bad) {
          const r = await request(`${p.admin}${path}`, { method, body: method === 'POST' ? '' : undefined, headers: a === undefined ? {} : { authorization: a } });
          assert.equal(r.status, 401, `${method} ${path} with ${JSON.stringify(a)}: ${r.status} ${r.text()}`);
          assert.equal(r.json().error.code, 'unauthorized');
          // Where Basic is taken (reading paths: the status page's browser login), the 401 offers it.
          assert.equal(r.headers['www-authenticate'], method === 'GET' ? 'Bearer, Basic realm="pacerd admin", charset="UTF-8"' : 'Bearer');
          assert.ok(!r.text().includes(ADMIN_TOKEN.slice(0, 8)), 'the 401 quotes the token');
          n++;
        }
        const ok = await request(`${p.admin}${path}`, { method, body: method === 'POST' ? '' : undefined, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        const want = path.startsWith('/nope') ? 404 : 200;
        assert.equal(ok.status, want, `${method} ${path} with the token: ${ok.status} ${ok.text()}`);
        const viaBasic = await request(`${p.admin}${path}`, { method, body: method === 'POST' ? '' : undefined, headers: { authorization: basicToken } });
        assert.equal(viaBasic.status, method === 'GET' ? want : 401, `${method} ${path} with the token as the Basic password`);
      }
      // The scheme is case-insensitive (RFC 9110 §11.1); the token is not.
      assert.equal((await request(`${p.admin}/healthz`, { headers: { authorization: `bearer ${ADMIN_TOKEN}` } })).status, 200);
      assert.deepEqual((await mock.stats()).requests, 0, 'an admin request reached the upstream');
      const log = p.stderr();
      assert.ok(!log.includes(ADMIN_TOKEN.slice(0, 8)), 'the log contains the admin token');
      t.note(`${n} refused requests over ${paths.length} paths`);
    },
  },
  {
    name: 'DNS rebinding: without admin.token the admin listener serves only a loopback Host (localhost, 127.0.0.0/8, [::1], any port); another name gets 403 host_not_loopback on every path; with a token the Host is not judged',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await pacerdWithAdmin(t, mock);
      const port = new URL(p.admin).port;
      for (const host of ['localhost', `localhost:${port}`, 'LOCALHOST', `127.0.0.1:${port}`, '127.1.2.3', `[::1]:${port}`, '[::1]']) {
        const r = await request(`${p.admin}/status`, { headers: { host } });
        assert.equal(r.status, 200, `Host: ${host}: ${r.status} ${r.text()}`);
      }
      for (const host of ['evil.example', `evil.example:${port}`, '127.0.0.1.evil.example', '127.0.0.1evil', 'localhost.evil.example', '[::2]:80', '[::1]x', '0.0.0.0', '10.0.0.1']) {
        for (const path of ['/', '/status', '/metrics', '/events', '/healthz']) {
          const r = await request(`${p.admin}${path}`, { headers: { host } });
          assert.equal(r.status, 403, `Host: ${host} ${path}: ${r.status}`);
          assert.equal(r.json().error.code, 'host_not_loopback');
        }
      }
      const reload = await request(`${p.admin}/reload`, { method: 'POST', body: '', headers: { host: 'evil.example' } });
      assert.equal(reload.status, 403);
      const q = await pacerdWithAdmin(t, mock, { admin: { token: ADMIN_TOKEN } });
      const withToken = await request(`${q.admin}/status`, { headers: { host: 'pacerd.internal:9090', authorization: `Bearer ${ADMIN_TOKEN}` } });
      assert.equal(withToken.status, 200, `with a token, another Host: ${withToken.status}`);
    },
  },
  {
    name: 'the admin listener beyond loopback without admin.token: pacerd refuses to start (exit non-zero, names admin.token); with a token it starts',
    fn: async (t) => {
      const port = await freePort();
      const file = `${t.dir}/sec-admin-${port}.yaml`;
      const aport = await freePort();
      for (const listen of [`0.0.0.0:${aport}`, `[::]:${aport}`, `:${aport}`, '192.0.2.1:9090']) {
        fs.writeFileSync(file, toYaml(t.baseConfig(port, { admin: { listen } })));
        for (const args of [['-c', file], ['--check-config', '-c', file]]) {
          const r = await runPacerd(args);
          assert.notEqual(r.code, 0, `${listen} ${args[0]}: exit 0\n${r.stderr}`);
          assert.match(r.stderr, /admin\.token/, `${listen}: ${r.stderr}`);
          assert.equal(await tryConnect(port), 'refused', `${listen}: something listens on ${port}`);
          assert.equal(await tryConnect(aport), 'refused', `${listen}: something listens on ${aport}`);
        }
      }
      // The same through PACERD_ADMIN_LISTEN over a file that keeps loopback.
      fs.writeFileSync(file, toYaml(t.baseConfig(port, { admin: { listen: `127.0.0.1:${aport}` } })));
      assert.equal((await runPacerd(['--check-config', '-c', file])).code, 0, 'the loopback file itself is valid');
      const r = await runPacerd(['-c', file], { env: { PACERD_ADMIN_LISTEN: `0.0.0.0:${aport}` } });
      assert.notEqual(r.code, 0, r.stderr);
      assert.match(r.stderr, /admin\.token/);
      // With a token it starts (127.0.0.2 is loopback too; 0.0.0.0 with a token).
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock, { admin: { listen: `0.0.0.0:${aport}`, token: ADMIN_TOKEN } });
      await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
      assert.equal((await request(`http://127.0.0.1:${aport}/healthz`)).status, 401);
      assert.equal((await request(`http://127.0.0.1:${aport}/healthz`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status, 200);
      assert.ok(p.alive);
    },
  },
  {
    name: 'never an open proxy: foreign hosts, Host games, userinfo, IPv6 literals, dot segments and encoded slashes, CONNECT: refused, nothing reaches the upstream',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await pacerdWithAdmin(t, mock);
      const M = `127.0.0.1:${mock.http}`;
      const H = (host) => (host === null ? '' : `Host: ${host}\r\n`);
      const req = (line, host = 'localhost', extra = '') => `${line} HTTP/1.1\r\n${H(host)}Authorization: Bearer sk-open-proxy-probe\r\n${extra}Content-Length: 0\r\nConnection: close\r\n\r\n`;
      const refused = [
        // [what, raw request, statuses allowed]
        ['absolute-form, foreign host', req('POST http://evil.example/v1/chat/completions', 'evil.example'), [403]],
        ['absolute-form https, foreign host', req('GET https://evil.example/v1/models', 'evil.example'), [403]],
        ['absolute-form, the mock itself', req(`GET http://${M}/v1/models`, M), [403]],
        ['absolute-form, foreign authority, Host of a provider', req('GET http://evil.example/v1/models', 'api.openai.com'), [403]],
        ['absolute-form, provider host as a suffix', req('GET http://api.openai.com.evil.example/v1/models', 'api.openai.com.evil.example'), [403]],
        ['absolute-form, provider host with a trailing dot', req('GET http://api.openai.com./v1/models', 'api.openai.com.'), [403]],
        ['userinfo naming a provider, host foreign', req('GET http://api.openai.com@evil.example/v1/models', 'evil.example'), [400, 403]],
        ['userinfo foreign, host a provider', req('GET http://evil.example@api.openai.com/v1/models', 'api.openai.com'), [400, 403]],
        ['userinfo with a password', req('GET http://user:pass@api.openai.com/v1/models', 'api.openai.com'), [400, 403]],
        ['encoded @ in the authority', req('GET http://api.openai.com%40evil.example/v1/models', 'evil.example'), [400, 403]],
        ['IPv6 loopback literal', req(`GET http://[::1]:${mock.http}/v1/models`, `[::1]:${mock.http}`), [400, 403]],
        ['IPv6 literal, unclosed', req('GET http://[::1/v1/models', '[::1]'), [400, 403]],
        ['IPv4-mapped IPv6 literal', req(`GET http://[::ffff:127.0.0.1]:${mock.http}/v1/models`, 'x'), [400, 403]],
        ['absolute-form, no host', req('GET http:///v1/models', 'api.openai.com'), [400]],
        ['another scheme', req('GET ftp://api.openai.com/v1/models', 'api.openai.com'), [400]],
        ['two Host fields', req('GET /v1/models', 'localhost', 'Host: evil.example\r\n'), [400]],
        ['two Host fields, absolute-form', req('GET http://api.openai.com/v1/models', 'api.openai.com', 'Host: evil.example\r\n'), [400]],
        ['dot-dot, encoded', req('GET /%2e%2e/v1/models'), [400]],
        ['dot-dot, encoded upper case', req('GET /%2E%2E/v1/models'), [400]],
        ['dot-dot, half encoded', req('GET /.%2e/v1/models'), [400]],
        ['dot-dot after a prefix, encoded', req('POST /anthropic/%2e%2e/v1/chat/completions'), [400]],
        ['dot-dot after a prefix', req('POST /anthropic/../v1/chat/completions'), [400]],
        ['dot-dot into a prefix', req('POST /v1/../anthropic/v1/messages'), [400]],
        ['dot-dot at the end', req('GET /anthropic/..'), [400]],
        ['dot segment', req('GET /./v1/models'), [400]],
        ['encoded slash', req('GET /anthropic%2f..%2fv1/models'), [400]],
        ['encoded slash, lower case', req('GET /v1%2fmodels'), [400]],
        ['encoded backslash', req('GET /anthropic/..%5cv1/models'), [400]],
        ['network-path reference', req('GET //evil.example/v1/models'), [400]],
        ['network-path after a prefix', req('GET /anthropic//evil.example/v1/models'), [400]],
        ['dot-dot in absolute-form', req('GET http://api.anthropic.com/../v1/models', 'api.anthropic.com'), [400]],
        ['asterisk-form', req('OPTIONS *'), [400, 405]],
        ['CONNECT to a foreign host', req('CONNECT evil.example:443', 'evil.example:443'), [403]],
        ['CONNECT to a provider on port 80', req('CONNECT api.openai.com:80', 'api.openai.com:80'), [403]],
        ['CONNECT to a provider on port 8443', req('CONNECT api.openai.com:8443', 'api.openai.com:8443'), [403]],
        ['CONNECT to the mock', req(`CONNECT ${M}`, M), [403]],
        ['CONNECT to a provider with userinfo', req('CONNECT u@api.openai.com:443', 'api.openai.com:443'), [400]],
        ['CONNECT to a provider without a port', req('CONNECT api.openai.com', 'api.openai.com'), [400]],
        ['CONNECT to the loopback', req('CONNECT 127.0.0.1:443', '127.0.0.1:443'), [403]],
        ['CONNECT to a provider, upper case, port 0443', req('CONNECT API.OPENAI.COM:0443', 'api.openai.com'), [403, 400]],
      ];
      const before = (await mock.stats()).requests;
      const failures = [];
      for (const [what, raw, want] of refused) {
        const r = await rawHttp(p.port, raw);
        if (!want.includes(r.status)) failures.push(`${what}: ${r.status} (want ${want.join('/')}) ${r.raw.toString('latin1').split('\r\n')[0]} ${r.body?.toString().slice(0, 120)}`);
      }
      const after = await mock.stats();
      const recs = await mock.requests();
      assert.deepEqual(failures, [], `answered wrongly:\n${failures.join('\n')}\nthe mock saw: ${recs.map((x) => `${x.method} ${x.uri}`).join(', ')}`);
      assert.equal(after.requests, before, `the mock got ${after.requests - before} of them: ${recs.map((x) => `${x.method} ${x.uri}`).join(', ')}`);
      // What is forwarded, and where: only ever to the configured upstream, with its own Host.
      const forwarded = [
        ['origin-form, Host foreign', req('GET /v1/models', 'evil.example'), '/v1/models'],
        ['origin-form, Host with a port', req('GET /v1/models', 'api.openai.com:8443'), '/v1/models'],
        ['absolute-form of a provider, Host foreign', req('GET http://api.openai.com/v1/models', 'evil.example'), '/v1/models'],
        ['absolute-form of a provider with a port', req('GET http://api.openai.com:8443/v1/models', 'api.openai.com:8443'), '/v1/models'],
        ['dots inside a segment', req('GET /v1/models/gpt-4.1..x'), '/v1/models/gpt-4.1..x'],
        ['dots in the query', req('GET /v1/models?x=../..%2f'), '/v1/models?x=../..%2f'],
      ];
      for (const [what, raw, uri] of forwarded) {
        await mock.reset();
        const r = await rawHttp(p.port, raw);
        assert.ok(!r.body?.toString().includes('pacer_error'), `${what}: ${r.status} ${r.body?.toString().slice(0, 200)}`);
        const rec = await mock.onlyRequest();
        assert.equal(rec.uri, uri, what);
        const hosts = rec.headers.filter(([k]) => k.toLowerCase() === 'host').map(([, v]) => v);
        assert.deepEqual(hosts, [M], `${what}: the upstream saw Host ${hosts}`);
      }
      t.note(`${refused.length} refused with nothing upstream; ${forwarded.length} forwarded to the configured upstream only`);
    },
  },
];
