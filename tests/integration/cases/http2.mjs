// SPDX-License-Identifier: Apache-2.0
// HTTP/2 to the upstream is opt-in per provider (`http2: true`; DESIGN §11: a
// paused HTTP/2 stream can stall its siblings in libcurl 7.88). A TLS server
// from Node's own http2 module (HTTP/1.1 allowed too, by ALPN) stands in for the
// provider and records the protocol of every request it gets.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http2 from 'node:http2';
import { SLOW, request, streamRequest } from '../lib.mjs';

async function startH2(t) {
  const seen = [];
  const server = http2.createSecureServer({
    key: fs.readFileSync(t.certs.key),
    cert: fs.readFileSync(t.certs.cert),
    allowHTTP1: true,
  }, (req, res) => {
    seen.push({ version: req.httpVersion, path: req.url, auth: req.headers.authorization });
    req.resume();
    if (req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"object":"list","data":[{"id":"gpt-h2","object":"model"}]}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let i = 0;
    const timer = setInterval(() => {
      if (i < 5) {
        res.write(`data: {"choices":[{"delta":{"content":"tok${i}"}}]}\n\n`);
        i++;
      } else {
        clearInterval(timer);
        res.end('data: [DONE]\n\n');
      }
    }, 50);
    res.on('close', () => clearInterval(timer));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.defer(() => new Promise((r) => server.close(() => r())));
  // Sessions stay open (pacerd pools its connection): close them so that
  // server.close() can finish.
  server.on('session', (s) => t.defer(() => s.destroy()));
  return { port: server.address().port, seen };
}

export const tests = [
  {
    name: 'http2: true: a request and a stream go over HTTP/2 to a TLS upstream and arrive whole',
    timeout_ms: 20000 * SLOW,
    fn: async (t) => {
      const up = await startH2(t);
      const p = await t.startPacerd({
        config: { providers: { openai: { upstream: `https://localhost:${up.port}`, http2: true, tls: { ca_file: t.certs.ca } } } },
      });
      const r = await request(`${p.url}/v1/models`, { headers: { authorization: 'Bearer sk-h2-0001' } });
      assert.equal(r.status, 200, `${r.status} ${r.body}`);
      assert.match(r.body.toString(), /"id":"gpt-h2"/);
      const s = await streamRequest(`${p.url}/v1/chat/completions`, {
        body: JSON.stringify({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'h2' }] }),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(s.status, 200);
      const body = (await s.done).toString();
      assert.equal((body.match(/"content":"tok\d"/g) ?? []).length, 5, body);
      assert.match(body, /data: \[DONE\]\n\n$/);
      assert.deepEqual(up.seen.map((x) => [x.version, x.path]), [['2.0', '/v1/models'], ['2.0', '/v1/chat/completions']]);
      assert.equal(up.seen[0].auth, 'Bearer sk-h2-0001');
    },
  },
  {
    name: 'without http2 the same upstream is spoken to in HTTP/1.1 (the default)',
    fn: async (t) => {
      const up = await startH2(t);
      const p = await t.startPacerd({
        config: { providers: { openai: { upstream: `https://localhost:${up.port}`, tls: { ca_file: t.certs.ca } } } },
      });
      const r = await request(`${p.url}/v1/models`);
      assert.equal(r.status, 200);
      assert.deepEqual(up.seen.map((x) => x.version), ['1.1']);
    },
  },
];
