// SPDX-License-Identifier: Apache-2.0
// Forward-proxy form (absolute request targets, CONNECT) and HTTPS upstreams.
import assert from 'node:assert/strict';
import { assertPacerError, rawHttp, recHeader, request, sha256 } from '../lib.mjs';

// Error configurations: one attempt, so that the answer is immediate.
const oneAttempt = { plans: { default: { retry: { max_attempts: 1 } } } };

export const tests = [
  {
    name: 'curl -x: http://api.openai.com/v1/models goes to the openai upstream',
    fn: async (t) => {
      const p = await t.pacerd();
      const r = await t.curl(['-x', p.url, '-H', 'Authorization: Bearer sk-test-fwdproxy', 'http://api.openai.com/v1/models?x=1']);
      assert.equal(r.exit, 0, r.stderr);
      assert.equal(r.status, 200);
      assert.deepEqual(JSON.parse(r.body).data.map((m) => m.id), ['gpt-mock', 'gpt-4o-mini', 'claude-mock']);
      assert.equal(r.headers['x-pacer-attempts'], '1');
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.method, 'GET');
      assert.equal(rec.uri, '/v1/models?x=1', 'the upstream gets an origin-form target');
      assert.equal(recHeader(rec, 'authorization'), 'Bearer sk-test-fwdproxy');
      assert.equal(recHeader(rec, 'host'), `127.0.0.1:${t.mock.http}`, 'Host rewritten for the upstream');
      assert.equal(recHeader(rec, 'proxy-connection'), undefined);
    },
  },
  {
    name: 'curl -x: POST http://api.anthropic.com/v1/messages goes to the anthropic upstream',
    fn: async (t) => {
      const p = await t.pacerd();
      const body = JSON.stringify({ model: 'claude-mock', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
      const r = await t.curl(['-x', p.url, '-H', 'x-api-key: sk-ant-fwdproxy', '-H', 'content-type: application/json',
        '--data-binary', body, 'http://api.anthropic.com/v1/messages']);
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(JSON.parse(r.body).type, 'message');
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.uri, '/v1/messages');
      assert.equal(recHeader(rec, 'x-api-key'), 'sk-ant-fwdproxy');
      assert.equal(rec.body_sha256, sha256(body));
    },
  },
  {
    name: 'forward-proxy form to other hosts: 403 host_not_allowed, nothing sent upstream',
    fn: async (t) => {
      const p = await t.pacerd();
      const r = await t.curl(['-x', p.url, 'http://example.com/']);
      assert.equal(r.status, 403);
      const e = assertPacerError({ status: r.status, headers: r.headers, body: r.body }, 403, 'host_not_allowed');
      assert.ok(e.message.length > 0);
      for (const target of ['http://api.openai.com.evil.example/v1/models', `http://127.0.0.1:${t.mock.http}/echo`, 'http://localhost/v1/models']) {
        const x = await rawHttp(p.port, `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\nConnection: close\r\n\r\n`);
        assert.equal(x.status, 403, `${target}: ${x.raw.toString('latin1').slice(0, 200)}`);
        assert.equal(JSON.parse(x.body).error.code, 'host_not_allowed', target);
      }
      assert.deepEqual(await t.mock.requests(), [], 'pacerd forwarded a request for a foreign host');
    },
  },
  {
    name: 'CONNECT to a foreign host, or to a provider on a port other than 443 (curl -p, raw), is answered 403 with a JSON explanation',
    fn: async (t) => {
      const p = await t.pacerd();
      const raw = await rawHttp(p.port, 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n', { timeout_ms: 3000 });
      const e = assertPacerError(raw, 403, 'host_not_allowed');
      assert.match(e.message, /CONNECT|open proxy/i);
      assert.ok(raw.why !== 'timeout', 'the 403 has no content-length (nor chunked framing) and the connection stays open: ' +
        'the client cannot tell where the body ends and waits');
      const c = await t.curl(['-p', '-x', p.url, 'http://api.openai.com/v1/models']);
      assert.notEqual(c.exit, 0, 'curl -p succeeded through pacerd');
      assert.match(c.stderr + c.allHeaderBlocks.join('\n'), /403/);
      assert.deepEqual(await t.mock.requests(), []);
      // pacerd still serves afterwards.
      assert.equal((await request(`${p.url}/v1/models`)).status, 200);
    },
  },
  {
    name: 'https upstream (provider tls.ca_file): requests under /secure reach the mock\'s TLS port',
    fn: async (t) => {
      const p = await t.pacerd();
      const r = await request(`${p.url}/secure/v1/models`, { headers: { authorization: 'Bearer sk-test-tls' } });
      assert.equal(r.status, 200, r.text());
      assert.match(r.text(), /gpt-mock/);
      const body = Buffer.from('tls body \u00e9\u0000\u00ff');
      const e = await request(`${p.url}/secure/echo/x?q=1`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
      assert.equal(e.status, 200);
      assert.equal(sha256(e.body), sha256(body));
      const rs = await t.mock.requests();
      assert.deepEqual(rs.map((x) => x.uri), ['/v1/models', '/echo/x?q=1'], 'prefix /secure stripped');
      for (const x of rs) assert.equal(recHeader(x, 'host'), `localhost:${t.mock.https}`, 'sent to the https port');
      assert.equal(recHeader(rs[0], 'authorization'), 'Bearer sk-test-tls');
    },
  },
  {
    name: 'https upstream with tls.verify: false (no ca_file) works',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { ...oneAttempt, providers: { securemock: { tls: { ca_file: null, verify: false } } } } });
      const r = await request(`${p.url}/secure/v1/models`);
      assert.equal(r.status, 200, r.text());
      assert.equal((await t.mock.onlyRequest()).uri, '/v1/models');
    },
  },
];
