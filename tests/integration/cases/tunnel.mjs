// SPDX-License-Identifier: Apache-2.0
// HTTPS forward proxy (issue 20): CONNECT to a provider's host is terminated with
// pacerd's own CA, and the requests inside go through the same intake as base-URL
// requests (routing by host, keys, lanes, pacing, streaming). Other hosts: 403.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import crypto from 'node:crypto';
import path from 'node:path';
import { Duplex } from 'node:stream';
import tls from 'node:tls';
import OpenAI from 'openai';
import { ProxyAgent } from 'undici';
import { SLOW, freePort, keyHash, recHeader, request, sleep, tryConnect, waitFor } from '../lib.mjs';
import { chatBody } from '../load.mjs';

const HOST = 'api.openai.com';

/** A pacerd of the test's own with an admin port; openai at the shared mock. */
async function pacerdAdmin(t, over = {}) {
  const aport = await freePort();
  const port = await freePort();
  const cfg = t.baseConfig(port, { admin: { listen: `127.0.0.1:${aport}` }, ...over });
  const p = await t.startPacerd({ port, config: cfg });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 5000 * SLOW, what: 'the admin port' });
  p.admin = `http://127.0.0.1:${aport}`;
  p.ca = path.join(p.stateDir, 'ca.pem');
  return p;
}

const status = async (p) => JSON.parse((await request(`${p.admin}/status`)).body.toString());
const metric = async (p, name) => {
  const text = (await request(`${p.admin}/metrics`)).body.toString();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

/** CONNECT host:port through pacerd: {socket, status, head} once the answer's head is in. */
function connect(port, authority, { extra = '' } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => { socket.destroy(); reject(new Error(`CONNECT ${authority}: no answer`)); }, 5000 * SLOW);
    socket.on('error', (e) => { clearTimeout(timer); reject(e); });
    socket.on('data', function onData(d) {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      clearTimeout(timer);
      socket.off('data', onData);
      const head = buf.subarray(0, end).toString('latin1');
      const rest = buf.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve({ socket, status: Number(head.split(' ')[1]), head, rest });
    });
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${extra}\r\n`);
  });
}

/** A TLS session over a CONNECT tunnel (servername: the SNI sent). */
async function tlsTunnel(p, { host = HOST, servername = host, ca = fs.readFileSync(p.ca) } = {}) {
  const c = await connect(p.port, `${host}:443`);
  assert.equal(c.status, 200, c.head);
  return new Promise((resolve, reject) => {
    const s = tls.connect({ socket: c.socket, servername, ca, ALPNProtocols: ['h2', 'http/1.1'] });
    s.once('secureConnect', () => resolve(s));
    s.once('error', reject);
  });
}

/** One HTTP/1.1 request over its own tunnel: {status, headers, body}. */
async function viaTunnel(p, { method = 'GET', path: target = '/v1/models', headers = {}, body } = {}) {
  const s = await tlsTunnel(p);
  return new Promise((resolve, reject) => {
    const req = http.request({ method, path: target, headers: { host: HOST, ...headers }, createConnection: () => s }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => { s.destroy(); resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts).toString() }); });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const fdCount = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;
const requestLines = (p) => p.logs().filter((l) => l.event === 'request');

export const tests = [
  {
    name: 'curl --proxy with the CA: a chat completion through a tunnel to a provider host reaches the mock; request line says tunnel: true; pacerd ca prints the paths and writes a bundle',
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      const key = 'sk-test-tunnel-curl-0001';
      const ca = p.ca;
      assert.equal(fs.statSync(path.join(p.stateDir, 'ca.key')).mode & 0o777, 0o600, 'CA key mode');
      const body = chatBody();
      const r = await t.curl(['--proxy', p.url, '--cacert', ca, `https://${HOST}/v1/chat/completions`,
        '-H', `authorization: Bearer ${key}`, '-H', 'content-type: application/json', '-H', 'x-request-id: tun-curl-1', '--data-binary', body]);
      assert.equal(r.exit, 0, r.stderr);
      assert.equal(r.status, 200);
      assert.match(r.allHeaderBlocks[0], /^HTTP\/1\.1 200 Connection established/);
      assert.equal(JSON.parse(r.body.toString()).choices[0].message.content, 'tok tok tok tok tok ');
      assert.equal(r.headers['x-pacer-attempts'], '1');
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.uri, '/v1/chat/completions');
      assert.equal(recHeader(rec, 'authorization'), `Bearer ${key}`);
      const line = await waitFor(() => requestLines(p).find((l) => l.request_id === 'tun-curl-1'), { timeout_ms: 3000 * SLOW, what: 'the request line' });
      assert.equal(line.tunnel, true);
      assert.equal(line.key, keyHash(key));
      assert.equal(line.path, '/v1/chat/completions');
      assert.ok(!p.stderr().includes(key) && !p.stderr().includes(key.slice(0, 20)), 'the API key is in the log');
      const st = (await status(p)).tunnels;
      assert.equal(st.ca, true);
      assert.ok(st.terminated >= 1 && st.handshakes >= 1 && st.requests >= 1, JSON.stringify(st));
      assert.equal(await metric(p, 'pacerd_tunnel_requests_total'), st.requests);
      // pacerd ca: the same CA, the bundle (system store + CA), never the key's content.
      const out = await t.runPacerd(['ca', '-c', p.configFile], { env: { STATE_DIRECTORY: p.stateDir } });
      assert.equal(out.code, 0, out.stderr);
      assert.ok(out.stdout.includes(ca), out.stdout);
      assert.match(out.stdout, /SSL_CERT_FILE=.*bundle\.pem/);
      assert.match(out.stdout, /NODE_EXTRA_CA_CERTS=/);
      assert.ok(!out.stdout.includes('PRIVATE KEY') && !p.stderr().includes('PRIVATE KEY'));
      const bundle = fs.readFileSync(path.join(p.stateDir, 'bundle.pem'), 'utf8');
      assert.ok(bundle.endsWith(fs.readFileSync(ca, 'utf8')), 'the bundle ends with the CA');
      if (fs.existsSync('/etc/ssl/certs/ca-certificates.crt'))
        assert.ok(bundle.length > 10000, 'the bundle holds the system store');
      // The bundle works for curl as CURL_CA_BUNDLE does.
      const r2 = await t.curl(['--proxy', p.url, '--cacert', path.join(p.stateDir, 'bundle.pem'), `https://${HOST}/v1/models`]);
      assert.equal(r2.status, 200, r2.stderr);
      // Keep-alive inside a tunnel: curl sends two requests through one CONNECT.
      const before = (await status(p)).tunnels;
      const r3 = await t.curl(['--proxy', p.url, '--cacert', ca, `https://${HOST}/v1/models`, '-o', '/dev/null', `https://${HOST}/v1/models`]);
      assert.equal(r3.status, 200, r3.stderr);
      const after = (await status(p)).tunnels;
      assert.equal(after.requests - before.requests, 2);
      assert.equal(after.terminated - before.terminated, 1, 'two requests, one tunnel');
    },
  },
  {
    name: 'the CA: a configured forward.ca_cert/ca_key pair is used as is; one that cannot be read refuses the start; a state directory that cannot be made leaves pacerd serving base-URL requests and CONNECT 503 ca_unavailable; forward.state_dir, its old name, still places it, with a config_deprecated line',
    fn: async (t) => {
      // The suite's own test CA, configured: the leaf verifies against it.
      const key = path.join(t.dir, 'own-ca.key');
      fs.copyFileSync(path.join(t.certs.dir, 'ca.key'), key);
      fs.chmodSync(key, 0o600);
      const p = await pacerdAdmin(t, { forward: { ca_cert: t.certs.ca, ca_key: key } });
      const r = await t.curl(['--proxy', p.url, '--cacert', t.certs.ca, `https://${HOST}/v1/models`]);
      assert.equal(r.status, 200, r.stderr);
      // (curl trusts only the suite's CA: the leaf was signed by the configured key.)
      await p.stop();
      // A key others can read, or a missing one: the start is refused, naming the setting.
      fs.chmodSync(key, 0o644);
      for (const ca_key of [key, path.join(t.dir, 'missing.key')]) {
        const file = path.join(t.dir, `refused-${path.basename(ca_key)}.yaml`);
        fs.writeFileSync(file, `listen: 127.0.0.1:${await freePort()}\nadmin: {listen: ""}\nforward: {ca_cert: "${t.certs.ca}", ca_key: "${ca_key}"}\n`);
        const out = await t.runPacerd(['-c', file], { timeout_ms: 5000 });
        assert.notEqual(out.code, 0, `started with ${ca_key}`);
        assert.match(out.stderr, /forward\.ca_cert/);
        assert.doesNotMatch(out.stderr, /PRIVATE KEY/);
      }
      // No state directory can be made (a file is in the way): a warning, base URL works, CONNECT 503.
      const blocker = path.join(t.dir, 'not-a-dir');
      fs.writeFileSync(blocker, '');
      const q = await pacerdAdmin(t, { state_dir: path.join(blocker, 'state') });
      assert.ok(q.logs().some((l) => l.event === 'ca_unavailable'), 'no ca_unavailable line');
      assert.equal((await request(`${q.url}/v1/models`)).status, 200);
      const c = await connect(q.port, `${HOST}:443`);
      assert.equal(c.status, 503, c.head);
      assert.equal((await status(q)).tunnels.ca, false);
      // forward.state_dir, state_dir's old name (0.2.0), still places the CA, and says it is deprecated.
      const old = path.join(t.dir, 'old-name-state');
      const o = await pacerdAdmin(t, { forward: { state_dir: old } });
      assert.ok(fs.existsSync(path.join(old, 'ca.pem')), 'no CA in forward.state_dir');
      const note = o.logs().filter((l) => l.event === 'config_deprecated');
      assert.equal(note.length, 1, JSON.stringify(o.logs().slice(0, 5)));
      assert.match(note[0].message, /forward\.state_dir is deprecated/);
    },
  },
  {
    name: 'curl --proxy: a streamed completion comes through the tunnel chunk by chunk, ending with [DONE]',
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      const r = await t.curl(['-N', '--proxy', p.url, '--cacert', p.ca, `https://${HOST}/v1/chat/completions`,
        '-H', 'authorization: Bearer sk-test-tunnel-stream', '-H', 'content-type: application/json', '--data-binary', chatBody({ stream: true })]);
      assert.equal(r.status, 200, r.stderr);
      assert.match(r.headers['content-type'] ?? '', /text\/event-stream/);
      const text = r.body.toString();
      assert.ok((text.match(/^data: \{/gm) ?? []).length >= 3, text.slice(0, 400));
      assert.match(text, /data: \[DONE\]/);
    },
  },
  {
    name: 'paced like base-URL traffic: 8 requests at once through tunnels under max_requests_per_second 10 reach the mock >= 630 ms apart in all, and share one lane with a base-URL request of the same key',
    fn: async (t) => {
      const p = await pacerdAdmin(t, { plans: { default: { max_requests_per_second: 10 } } });
      const key = 'sk-test-tunnel-paced-0001';
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const rs = await Promise.all(Array.from({ length: 8 }, () => viaTunnel(p, { method: 'POST', path: '/v1/chat/completions', headers: auth, body: chatBody() })));
      assert.deepEqual(rs.map((r) => r.status), Array(8).fill(200));
      const ts = (await t.mock.requests()).map((r) => r.t_mono_us / 1000).sort((a, b) => a - b);
      assert.equal(ts.length, 8);
      const spread = ts.at(-1) - ts[0];
      t.note(`8 tunnelled requests spread over ${spread.toFixed(0)} ms at 10 rps (700 planned)`);
      assert.ok(spread >= 630, `spread ${spread} ms: not paced`);
      // The same key by base URL: the same lane (one lane for the key, 9 dispatched).
      const b = await request(`${p.url}/v1/chat/completions`, { method: 'POST', headers: auth, body: chatBody() });
      assert.equal(b.status, 200);
      const lanes = (await status(p)).lanes.filter((l) => l.key === keyHash(key));
      assert.equal(lanes.length, 1, JSON.stringify(lanes));
      assert.equal(lanes[0].counters?.dispatched, 9, JSON.stringify(lanes[0]));
    },
  },
  {
    name: 'the official openai SDK through undici\'s ProxyAgent (HTTPS_PROXY style) with the CA: a chat completion and a stream',
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      const dispatcher = new ProxyAgent({ uri: p.url, requestTls: { ca: fs.readFileSync(p.ca) } });
      t.defer(() => dispatcher.close());
      const client = new OpenAI({ apiKey: 'sk-test-tunnel-sdk-0001', baseURL: `https://${HOST}/v1`, maxRetries: 0, timeout: 10000 * SLOW, fetchOptions: { dispatcher } });
      const data = await client.chat.completions.create({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(data.choices[0].message.content, 'tok tok tok tok tok ');
      let chunks = 0;
      const stream = await client.chat.completions.create({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'hi' }] });
      for await (const c of stream) if (c.choices?.[0]?.delta?.content) chunks++;
      assert.ok(chunks >= 3, `${chunks} chunks`);
      const recs = await t.mock.requests();
      assert.equal(recs.length, 2);
      assert.equal(recHeader(recs[0], 'authorization'), 'Bearer sk-test-tunnel-sdk-0001');
      assert.ok(requestLines(p).filter((l) => l.tunnel === true).length >= 2);
      const st = (await status(p)).tunnels;
      t.note(`${st.requests} requests through ${st.terminated} tunnel(s)`);
      assert.equal(st.requests, 2);
    },
  },
  {
    name: 'Debian\'s python3-httpx with HTTPS_PROXY and SSL_CERT_FILE set to the bundle of pacerd ca',
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      const out = await t.runPacerd(['ca', '-c', p.configFile], { env: { STATE_DIRECTORY: p.stateDir } });
      assert.equal(out.code, 0, out.stderr);
      const bundle = path.join(p.stateDir, 'bundle.pem');
      const script = `import httpx
r = httpx.post("https://${HOST}/v1/chat/completions", headers={"authorization": "Bearer sk-test-tunnel-httpx"},
               json={"model": "gpt-mock", "messages": [{"role": "user", "content": "hi"}]}, timeout=10)
print(r.status_code, r.json()["choices"][0]["message"]["content"])`;
      const env = { ...process.env, HTTPS_PROXY: p.url, SSL_CERT_FILE: bundle, NO_PROXY: '' };
      const res = await new Promise((resolve) => execFile('/usr/bin/python3', ['-c', script], { env, timeout: 20000 * SLOW },
        (err, stdout, stderr) => resolve({ err, stdout, stderr })));
      assert.equal(res.err, null, res.stderr);
      assert.equal(res.stdout.trim(), '200 tok tok tok tok tok');
      assert.equal(recHeader(await t.mock.onlyRequest(), 'authorization'), 'Bearer sk-test-tunnel-httpx');
    },
  },
  {
    name: 'CONNECT to a host that is not a provider (or a provider on another port): 403 host_not_allowed, connection closed, nothing forwarded, counted as denied',
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      for (const a of ['example.com:443', `${HOST}:80`, `127.0.0.1:${t.mock.http}`]) {
        const c = await connect(p.port, a);
        assert.equal(c.status, 403, `${a}: ${c.head}`);
        assert.match(c.head, /connection: close/i);
        const body = await new Promise((resolve) => { let b = c.rest.toString(); c.socket.on('data', (d) => { b += d; }); c.socket.on('close', () => resolve(b)); });
        assert.equal(JSON.parse(body).error.code, 'host_not_allowed', a);
      }
      const r = await t.curl(['--proxy', p.url, 'https://example.com/']);
      assert.notEqual(r.exit, 0);
      assert.match(r.allHeaderBlocks.join('\n'), /403/);
      assert.deepEqual(await t.mock.requests(), []);
      assert.equal((await status(p)).tunnels.denied, 4);
    },
  },
  {
    name: 'bad input on the TLS side: garbage for a ClientHello, a handshake that never finishes, an SNI for another host, plain HTTP in the tunnel: each a clear end; the next client is served',
    fn: async (t) => {
      const p = await pacerdAdmin(t, { limits: { client_timeout_s: 1 } });
      const closed = (s) => new Promise((resolve) => { let b = ''; s.on('data', (d) => { b += d.toString('latin1'); }); s.on('close', () => resolve(b)); s.on('error', () => {}); });
      // Garbage: closed at once, without an answer.
      let c = await connect(p.port, `${HOST}:443`);
      const t0 = Date.now();
      c.socket.write(Buffer.alloc(300, 0x41));
      let got = await closed(c.socket);
      assert.ok(Date.now() - t0 < 900 * SLOW, `garbage closed after ${Date.now() - t0} ms`);
      assert.ok(!got.includes('HTTP/'), got.slice(0, 100));
      // Half a handshake, then silence: closed at client_timeout_s (1 s).
      c = await connect(p.port, `${HOST}:443`);
      const t1 = Date.now();
      c.socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]));
      await closed(c.socket);
      const waited = Date.now() - t1;
      assert.ok(waited >= 800 && waited < 3000 * SLOW, `a stalled handshake closed after ${waited} ms`);
      // SNI for another host: the handshake fails (unrecognized_name).
      await assert.rejects(tlsTunnel(p, { servername: 'api.anthropic.com' }), /unrecognized|alert|socket/i);
      // Plain HTTP into the tunnel: a plain 400 tls_expected.
      c = await connect(p.port, `${HOST}:443`);
      c.socket.write(`GET /v1/models HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
      got = await closed(c.socket);
      assert.match(got, /^HTTP\/1\.1 400/);
      assert.match(got, /tls_expected/);
      // A client that does not trust the CA: refused by the client, pacerd counts a failed handshake.
      await assert.rejects(tlsTunnel(p, { ca: fs.readFileSync(t.certs.ca) }), /self|certificate|issuer/i);
      await waitFor(async () => (await status(p)).tunnels.handshake_failures >= 5, { timeout_ms: 3000 * SLOW, what: '5 failed handshakes' });
      assert.equal(await metric(p, 'pacerd_tls_handshakes_total{result="failed"}'), (await status(p)).tunnels.handshake_failures);
      // The next client is served.
      const r = await viaTunnel(p);
      assert.equal(r.status, 200);
      assert.deepEqual((await t.mock.requests()).map((x) => x.uri), ['/v1/models']);
    },
  },
  {
    name: 'a blind tunnel is byte for byte (any bytes, not only TLS) and is closed after limits.client_timeout_s of silence both ways',
    fn: async (t) => {
      const got = [];
      let serverClosed = false;
      const srv = net.createServer((c) => {
        c.on('data', (d) => { got.push(d); c.write(Buffer.from(d).reverse()); });
        c.on('close', () => { serverClosed = true; });
        c.on('error', () => {});
      });
      await new Promise((r) => srv.listen(0, '127.0.0.1', r));
      t.defer(() => new Promise((r) => srv.close(r)));
      const port = srv.address().port;
      const p = await pacerdAdmin(t, { limits: { client_timeout_s: 1 }, forward: { tunnel: [`127.0.0.1:${port}`] } });
      const c = await connect(p.port, `127.0.0.1:${port}`);
      assert.equal(c.status, 200, c.head);
      const msg = Buffer.concat([Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n\0\xff'), crypto.randomBytes(1000)]);
      const echo = new Promise((resolve) => { let b = Buffer.alloc(0); c.socket.on('data', (d) => { b = Buffer.concat([b, d]); if (b.length >= msg.length) resolve(b); }); });
      c.socket.write(msg);
      const back = await echo;
      assert.ok(Buffer.concat(got).equals(msg), 'the server got other bytes');
      assert.equal(back.length, msg.length);
      const t0 = Date.now();
      await new Promise((resolve) => c.socket.on('close', resolve));
      const idle = Date.now() - t0;
      assert.ok(idle >= 800 && idle < 4000 * SLOW, `closed after ${idle} ms of silence`);
      await waitFor(() => serverClosed, { timeout_ms: 3000 * SLOW, what: 'the upstream side closed too' });
      assert.equal((await status(p)).tunnels.blind_open, 0);
    },
  },
  {
    name: 'slow readers: a 30 MiB stream through a terminated tunnel and 32 MiB through a blind one are not buffered whole (the upstream waits, RSS stays < 24 MiB above its baseline), then arrive complete',
    timeout_ms: 60000,
    fn: async (t) => {
      const asan = [process.env.ASAN_OPTIONS, 'quarantine_size_mb=0', 'thread_local_quarantine_size_kb=0'].filter(Boolean).join(':');
      const BLIND = 32 * 1024 * 1024;
      let served = 0;
      const srv = net.createServer((c) => {
        c.on('error', () => {});
        const block = Buffer.alloc(256 * 1024, 0x5a);
        const more = () => {
          while (served < BLIND) {
            served += block.length;
            if (!c.write(block)) { c.once('drain', more); return; }
          }
          c.end();
        };
        more();
      });
      await new Promise((r) => srv.listen(0, '127.0.0.1', r));
      t.defer(() => new Promise((r) => srv.close(r)));
      const port = srv.address().port;
      const aport = await freePort();
      const pport = await freePort();
      const p = await t.startPacerd({ port: pport, env: { ASAN_OPTIONS: asan },
        config: t.baseConfig(pport, { admin: { listen: `127.0.0.1:${aport}` }, forward: { tunnel: [`127.0.0.1:${port}`] } }) });
      // The admin port opens once the CA is made (the proxy's port opens before it).
      await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 5000 * SLOW, what: 'the admin port' });
      p.ca = path.join(p.stateDir, 'ca.pem');
      await viaTunnel(p); // pools and the leaf are warm
      await t.mock.reset();
      const base = p.rssKiB();
      let max = base;
      const sampler = setInterval(() => { try { max = Math.max(max, p.rssKiB()); } catch { /* exited */ } }, 50);
      try {
        // Terminated: the mock streams 30 x 1 MiB; the reader pauses for 1.5 s.
        const s = await tlsTunnel(p);
        const res = await new Promise((resolve, reject) => {
          const req = http.request({ method: 'POST', path: '/v1/chat/completions', createConnection: () => s,
            headers: { host: HOST, 'content-type': 'application/json', 'x-mock-chunks': '30', 'x-mock-chunk-bytes': String(1024 * 1024) } }, resolve);
          req.on('error', reject);
          req.end(chatBody({ stream: true }));
        });
        assert.equal(res.statusCode, 200);
        res.pause();
        await sleep(1500);
        assert.equal((await t.mock.stats()).streams_completed, 0, 'the mock finished while the client was paused: pacerd buffered the stream');
        let got = 0;
        res.on('data', (d) => { got += d.length; });
        res.resume();
        await new Promise((r) => res.on('end', r));
        s.destroy();
        assert.ok(got > 30 * 1024 * 1024, `${got} bytes through the tunnel`);
        // Blind: the server sends 32 MiB; the reader pauses for 1.5 s.
        const c = await connect(p.port, `127.0.0.1:${port}`);
        assert.equal(c.status, 200);
        c.socket.pause();
        await sleep(1500);
        assert.ok(served < BLIND, `the server wrote all ${served} bytes while the client was paused: pacerd buffered them`);
        let blindGot = c.rest.length;
        c.socket.on('data', (d) => { blindGot += d.length; });
        c.socket.resume();
        await new Promise((r) => c.socket.on('close', r));
        assert.equal(blindGot, BLIND);
      } finally {
        clearInterval(sampler);
      }
      const grew = (max - base) / 1024;
      t.note(`pacerd RSS: baseline ${(base / 1024).toFixed(1)} MiB, max ${(max / 1024).toFixed(1)} MiB`);
      assert.ok(grew < 24, `pacerd RSS grew by ${grew.toFixed(1)} MiB`);
    },
  },
  {
    name: 'an upload through a terminated tunnel streams (issue 28 item 6): 24 MiB to /v1/files reach the mock byte-identical, pacerd\'s VmHWM grows < 16 MiB',
    timeout_ms: 30000,
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      const hwm = () => Number(/^VmHWM:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${p.pid}/status`, 'utf8'))[1]);
      const body = crypto.randomBytes(24 * 1024 * 1024);
      const warm = await viaTunnel(p, { method: 'POST', path: '/v1/files', body: body.subarray(0, 1024 * 1024) });
      assert.equal(warm.status, 200, warm.body);
      await t.mock.reset();
      const before = hwm();
      const r = await viaTunnel(p, { method: 'POST', path: '/v1/files', headers: { 'content-type': 'application/octet-stream' }, body });
      const after = hwm();
      assert.equal(r.status, 200, r.body);
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.body_len, body.length);
      assert.equal(rec.body_sha256, crypto.createHash('sha256').update(body).digest('hex'));
      t.note(`VmHWM ${before} -> ${after} KiB`);
      if (!t.valgrind) assert.ok(after - before < 16 * 1024, `VmHWM grew ${after - before} KiB`);
    },
  },
  {
    name: 'a ClientHello sent in the same packet as the CONNECT, before its 200 (bytes httpd had already read go to the TLS session): served',
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      const raw = net.connect(p.port, '127.0.0.1');
      await new Promise((r) => raw.once('connect', r));
      let sent = false;
      let head = Buffer.alloc(0);
      let inHead = true;
      const d = new Duplex({
        read() {},
        write(chunk, enc, cb) {
          // The first write is the ClientHello: glued to the CONNECT head.
          raw.write(sent ? chunk : Buffer.concat([Buffer.from(`CONNECT ${HOST}:443 HTTP/1.1\r\nHost: ${HOST}:443\r\n\r\n`), chunk]));
          sent = true;
          cb();
        },
      });
      raw.on('data', (x) => {
        if (!inHead) { d.push(x); return; }
        head = Buffer.concat([head, x]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        inHead = false;
        assert.match(head.subarray(0, end).toString(), /^HTTP\/1\.1 200/);
        if (head.length > end + 4) d.push(head.subarray(end + 4));
      });
      raw.on('end', () => d.push(null));
      raw.on('error', () => {});
      const s = await new Promise((resolve, reject) => {
        const x = tls.connect({ socket: d, servername: HOST, ca: fs.readFileSync(p.ca) });
        x.once('secureConnect', () => resolve(x));
        x.once('error', reject);
      });
      const r = await new Promise((resolve, reject) => {
        const req = http.request({ path: '/v1/models', headers: { host: HOST }, createConnection: () => s }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(r, 200);
      s.destroy();
      raw.destroy();
      assert.equal((await t.mock.onlyRequest()).uri, '/v1/models');
    },
  },
  {
    name: '1,000 handshakes at once: all complete, no descriptor left behind once they close, the next request served',
    timeout_ms: 60000,
    fn: async (t) => {
      const p = await pacerdAdmin(t);
      await viaTunnel(p); // the leaf is made, the pools are warm
      const before = fdCount(p.pid);
      const N = 1000;
      const t0 = Date.now();
      const results = await Promise.allSettled(Array.from({ length: N }, () => tlsTunnel(p)));
      const ok = results.filter((r) => r.status === 'fulfilled');
      t.note(`${ok.length}/${N} handshakes in ${Date.now() - t0} ms`);
      assert.equal(ok.length, N, results.find((r) => r.status === 'rejected')?.reason?.message);
      // TLS 1.3: the client is done before the server has read its Finished; a
      // client closed this instant would count as a cut handshake.
      await waitFor(async () => (await status(p)).tunnels.handshakes >= N + 1, { timeout_ms: 5000 * SLOW, what: `${N + 1} handshakes seen by pacerd` });
      assert.equal((await status(p)).tunnels.open, N);
      for (const r of ok) r.value.destroy();
      await waitFor(() => fdCount(p.pid) <= before, { timeout_ms: 5000 * SLOW, what: `pacerd's descriptors back to ${before} (now ${fdCount(p.pid)})` });
      const st = (await status(p)).tunnels;
      assert.equal(st.open, 0);
      assert.equal(st.handshake_failures, 0, JSON.stringify(st));
      assert.equal(st.certificates, 1, 'one leaf for the host, made once');
      const r = await viaTunnel(p);
      assert.equal(r.status, 200);
      await sleep(10);
    },
  },
  {
    name: 'opt-in blind tunnel (forward.tunnel: localhost:PORT): a local TLS server\'s own certificate and 300 KB each way pass untouched; nothing reaches the mock; a closed port is 502 tunnel_unreachable',
    fn: async (t) => {
      // A TLS echo server with the suite's own localhost certificate (not pacerd's CA).
      const seen = [];
      const srv = tls.createServer({ cert: fs.readFileSync(t.certs.cert), key: fs.readFileSync(t.certs.key) }, (s) => {
        s.on('data', (d) => { seen.push(d); s.write(d); });
        s.on('error', () => {});
      });
      await new Promise((r) => srv.listen(0, '127.0.0.1', r));
      t.defer(() => new Promise((r) => srv.close(r)));
      const port = srv.address().port;
      const closed = await freePort();
      const p = await pacerdAdmin(t, { forward: { tunnel: [`localhost:${port}`, `localhost:${closed}`] } });
      const c = await connect(p.port, `localhost:${port}`);
      assert.equal(c.status, 200, c.head);
      const s = await new Promise((resolve, reject) => {
        const x = tls.connect({ socket: c.socket, servername: 'localhost', ca: fs.readFileSync(t.certs.ca) });
        x.once('secureConnect', () => resolve(x));
        x.once('error', reject);
      });
      assert.equal(s.getPeerCertificate().subject.CN, 'localhost', 'the server\'s own certificate, not one of pacerd\'s');
      const data = crypto.randomBytes(300 * 1024);
      const back = [];
      let got = 0;
      const done = new Promise((resolve) => s.on('data', (d) => { back.push(d); got += d.length; if (got >= data.length) resolve(); }));
      s.write(data);
      await done;
      assert.ok(Buffer.concat(back).equals(data), 'the echo differs');
      assert.ok(Buffer.concat(seen).equals(data), 'the server saw other bytes');
      s.end();
      // Not paced, not decrypted: no request line, nothing at the mock; counted as blind.
      assert.deepEqual(await t.mock.requests(), []);
      assert.equal(requestLines(p).length, 0);
      const st = (await status(p)).tunnels;
      assert.equal(st.blind, 1, JSON.stringify(st));
      assert.equal(st.terminated, 0);
      // Nobody listens: a 502 the client can read.
      const u = await connect(p.port, `localhost:${closed}`);
      assert.equal(u.status, 502, u.head);
      const body = await new Promise((resolve) => { let b = u.rest.toString(); u.socket.on('data', (d) => { b += d; }); u.socket.on('close', () => resolve(b)); });
      assert.equal(JSON.parse(body).error.code, 'tunnel_unreachable');
      assert.equal(await metric(p, 'pacerd_tunnels_total{outcome="unreachable"}'), 1);
      // Not listed: 403, whatever the port.
      assert.equal((await connect(p.port, `localhost:${port + 1}`)).status, 403);
      await waitFor(async () => (await status(p)).tunnels.blind_open === 0, { timeout_ms: 3000 * SLOW, what: 'the blind tunnel closed' });
    },
  },
];
