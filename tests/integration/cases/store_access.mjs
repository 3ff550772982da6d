// SPDX-License-Identifier: Apache-2.0
// Reaching the shared store where people run Redis (issue 22): a host name resolved
// without blocking the loop and again at every reconnect, AUTH (a password, an ACL
// user, a wrong password), TLS with verification (a good CA, a wrong CA, a server
// name that does not match). Real redis-server processes (lib/redis.mjs), a mock
// each, pacerd with a plan decided in Redis.
//
// The configuration (issue 22):
//   store.redis: { address: HOST:PORT, username: "", password_file: "",
//                  resolv_conf: /etc/resolv.conf,
//                  tls: { enabled: false, ca_file: "", server_name: "", cert_file: "", key_file: "" } }
//   PACERD_STORE_PASSWORD: the password when password_file is "".
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  SLOW, freePort, keyHash, makeCerts, request, respEncode, respParse, startRedis, toYaml, tryConnect, waitFor,
} from '../lib.mjs';
import { chatBody, events, logDigest, runLoad, startPacerdFor, summarize } from '../load.mjs';

const PREFIX = 'itest:';

const chat = (key) => () => ({
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  body: chatBody({ max_tokens: 16 }),
});

const storeConf = (address, over = {}) => ({
  kind: 'redis',
  redis: { address, key_prefix: PREFIX, timeout_ms: 200, on_error: 'local', replicas: 1, ...over },
});

const storeEvents = (p) => logDigest(p, ['store_connected', 'store_unavailable', 'store_restored', 'store_error'], 6);

/** `n` requests through p at 100 req/s (a plan decided in Redis): all 200, decided in the store. */
async function decidedInRedis(p, key, n = 10) {
  const run = await runLoad({ base: p.url, n, concurrency: 2, makeRequest: chat(key), deadline_ms: 8000 });
  const s = summarize(run);
  assert.equal(s.ok, n, `${JSON.stringify(s.statuses)} ${s.firstErrors.join(' | ')}\n${storeEvents(p)}`);
}

/** startPacerdFor with environment variables. */
async function startWithEnv(t, mock, over, env) {
  const port = await freePort();
  const cfg = t.baseConfig(port, { providers: { openai: { upstream: mock.url } }, ...over });
  return t.startPacerd({ port, env, config: toYaml(cfg) });
}

/** Commands on one connection, AUTH first when `auth` (an array: [password] or [user, password]). */
function redisAuthed(port, auth, args, { timeout_ms = 3000 } = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    const want = auth ? 2 : 1;
    const timer = setTimeout(() => { s.destroy(); reject(new Error('redis: no reply')); }, timeout_ms);
    s.on('connect', () => s.write(Buffer.concat([...(auth ? [respEncode(['AUTH', ...auth])] : []), respEncode(args)])));
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const out = [];
      let pos = 0;
      for (let i = 0; i < want; i++) {
        const r = respParse(buf, pos);
        if (!r) return;
        out.push(r.value);
        pos = r.pos;
      }
      clearTimeout(timer);
      s.destroy();
      const v = out[out.length - 1];
      if (v instanceof Error) reject(v); else resolve(v);
    });
    s.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

/**
 * A DNS server on 127.0.0.1 (UDP) for one name: A queries for `name` are answered with
 * `answer` (an IPv4 address, or null: NXDOMAIN), every other query NXDOMAIN, AAAA for
 * the name with no records. `queries` counts the A queries for the name.
 */
async function startDns(t, name) {
  const sock = dgram.createSocket('udp4');
  const dns = { answer: null, queries: 0 };
  sock.on('message', (msg, rinfo) => {
    if (msg.length < 12) return;
    let pos = 12;
    const labels = [];
    for (let i = 0; i < 64 && pos < msg.length && msg[pos] !== 0; i++) {
      labels.push(msg.toString('latin1', pos + 1, pos + 1 + msg[pos]));
      pos += msg[pos] + 1;
    }
    pos++;
    if (pos + 4 > msg.length) return;
    const qtype = msg.readUInt16BE(pos);
    const question = msg.subarray(12, pos + 4);
    const qname = labels.join('.').toLowerCase();
    const ours = qname === name;
    if (ours && qtype === 1) dns.queries++;
    const a = ours && qtype === 1 && dns.answer ? dns.answer.split('.').map(Number) : null;
    const head = Buffer.alloc(12);
    msg.copy(head, 0, 0, 2); // id
    head.writeUInt16BE(0x8180 | (ours ? 0 : 3), 2); // response, RD+RA; NXDOMAIN unless ours
    if (ours && qtype === 1 && !dns.answer) head.writeUInt16BE(0x8183, 2);
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(a ? 1 : 0, 6);
    const parts = [head, question];
    if (a) {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0); // the name of the question
      rr.writeUInt16BE(1, 2); // A
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(0, 6); // TTL 0: ask again every time
      rr.writeUInt16BE(4, 10);
      Buffer.from(a).copy(rr, 12);
      parts.push(rr);
    }
    sock.send(Buffer.concat(parts), rinfo.port, rinfo.address);
  });
  await new Promise((resolve) => sock.bind(0, '127.0.0.1', resolve));
  dns.port = sock.address().port;
  t.defer(() => new Promise((resolve) => sock.close(resolve)));
  return dns;
}

/** A client certificate (clientAuth) signed by the CA of `certs` (lib makeCerts). */
function makeClientCert(certs) {
  const f = (n) => path.join(certs.dir, n);
  const ossl = (...a) => execFileSync('openssl', a, { stdio: ['ignore', 'ignore', 'pipe'] });
  fs.writeFileSync(f('client.cnf'), 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n');
  ossl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', f('client.key'),
    '-out', f('client.csr'), '-subj', '/CN=pacerd itest client');
  ossl('x509', '-req', '-in', f('client.csr'), '-CA', certs.ca, '-CAkey', path.join(certs.dir, 'ca.key'), '-CAcreateserial',
    '-out', f('client.pem'), '-days', '2', '-extfile', f('client.cnf'));
  return { cert: f('client.pem'), key: f('client.key') };
}

/** A redis-server with a TLS port beside its plain one (the plain one for the test's own commands). */
async function startTlsRedis(t, certs, { authClients = 'no' } = {}) {
  const tlsPort = await freePort();
  const redis = await startRedis(t, {
    args: ['--tls-port', String(tlsPort), '--tls-cert-file', certs.cert, '--tls-key-file', certs.key,
      '--tls-ca-cert-file', certs.ca, '--tls-auth-clients', authClients],
  });
  redis.tlsPort = tlsPort;
  return redis;
}

/** pacerd must refuse to start with `store`: non-zero exit, stderr matching `re`, port never open. */
async function refusesToStart(t, mock, store, re, env = {}) {
  const port = await freePort();
  const f = path.join(t.dir, `store-access-${port}.yaml`);
  fs.writeFileSync(f, toYaml(t.baseConfig(port, {
    providers: { openai: { upstream: mock.url } }, store, plans: { default: { max_requests_per_second: 100 } },
  })));
  const r = await t.runPacerd(['-c', f], { timeout_ms: 8000, env });
  assert.notEqual(r.code, 0, `pacerd started (exit ${JSON.stringify(r.code)}): ${r.stderr.slice(-400)}`);
  assert.match(r.stderr, re, `stderr: ${JSON.stringify(r.stderr.slice(-600))}`);
  assert.equal(await tryConnect(port, 300), 'refused');
  return r;
}

export const tests = [
  {
    // l. store.redis.address names a host: localhost (from /etc/hosts, through evdns)
    // reaches the Redis on 127.0.0.1, and lanes are decided there (their keys appear).
    name: 'l. a host name: localhost:PORT is resolved (evdns) and the store decides',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const redis = await startRedis(t);
      const p = await startPacerdFor(t, mock, {
        store: storeConf(`localhost:${redis.port}`), plans: { default: { max_requests_per_second: 100 } },
      });
      await decidedInRedis(p, 'sk-access-l-0001');
      assert.ok(events(p, 'store_connected').length === 1, storeEvents(p));
      const keys = await redis.keys(`${PREFIX}{openai:${keyHash('sk-access-l-0001')}*`);
      assert.ok(keys.length >= 1, `no lane key in Redis: ${JSON.stringify(await redis.keys('*'))}`);
    },
  },
  {
    // l2. The name is resolved again at every connect. A DNS server of the test's own
    // (store.redis.resolv_conf names it) first knows no such name: pacerd starts with the
    // store down ("cannot resolve"), serving locally; once the name resolves to the Redis,
    // the store connects within a second. Redis restarted: the reconnect asks the DNS
    // server again (its count of queries grows) and the store is restored.
    name: 'l2. a name that does not resolve yet, then does: the store connects; a reconnect resolves it again',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const redis = await startRedis(t);
      const dns = await startDns(t, 'redis.itest');
      const resolv = path.join(t.dir, 'resolv-l2.conf');
      fs.writeFileSync(resolv, `nameserver 127.0.0.1:${dns.port}\noptions ndots:1 timeout:1 attempts:1\n`);
      const p = await startPacerdFor(t, mock, {
        store: storeConf(`redis.itest:${redis.port}`, { resolv_conf: resolv }),
        plans: { default: { max_requests_per_second: 100 } },
      });
      // Logged once the start-up check gave up (it may come after /readyz, as it did once
      // under ASan): waited for, not read at once.
      await waitFor(() => events(p, 'store_unavailable').some((l) => /resolve/.test(l.reason ?? '')),
        { timeout_ms: 3000 * SLOW, what: `a store_unavailable naming the resolution\n${storeEvents(p)}` });
      await decidedInRedis(p, 'sk-access-l2-0001', 4); // served locally meanwhile
      const before = dns.queries;
      dns.answer = '127.0.0.1';
      await waitFor(() => events(p, 'store_connected').length + events(p, 'store_restored').length >= 1,
        { timeout_ms: 2000 * SLOW, what: 'the store to connect once the name resolves' });
      assert.ok(dns.queries > before, `no new query after the name appeared (${dns.queries})`);
      await decidedInRedis(p, 'sk-access-l2-0002');
      const asked = dns.queries;
      await redis.restart();
      await waitFor(() => events(p, 'store_restored').length >= 1,
        { timeout_ms: 3000 * SLOW, what: `store_restored after the Redis restart\n${storeEvents(p)}` });
      assert.ok(dns.queries > asked, `the reconnect did not resolve the name again (${asked} -> ${dns.queries} queries)`);
      t.note(`l2: ${dns.queries} A queries for redis.itest in all`);
    },
  },
  {
    // m. AUTH. A Redis with a password (requirepass) and an ACL user: pacerd with the
    // password in store.redis.password_file reaches it; with username + the user's
    // password in PACERD_STORE_PASSWORD too. The password is in no log line, not in
    // /status; --check-config says where it comes from without it. A wrong password:
    // pacerd refuses to start, naming AUTH, without the password.
    name: 'm. AUTH: password_file, an ACL user with PACERD_STORE_PASSWORD, a wrong password refused at start; the password shown nowhere',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const redis = await startRedis(t);
      const PW = 'itest-requirepass-5e1f', USERPW = 'itest-aclpass-93ab';
      await redis.command('ACL', 'SETUSER', 'pacer', 'on', `>${USERPW}`, '~*', '&*', '+@all');
      await redis.command('CONFIG', 'SET', 'requirepass', PW);
      await assert.rejects(redis.command('PING'), /NOAUTH/);
      const pwFile = path.join(t.dir, 'redis-password');
      fs.writeFileSync(pwFile, `${PW}\n`, { mode: 0o600 });
      const aport = await freePort();
      const p = await startPacerdFor(t, mock, {
        admin: { listen: `127.0.0.1:${aport}` },
        store: storeConf(redis.address, { password_file: pwFile }), plans: { default: { max_requests_per_second: 100 } },
      });
      await decidedInRedis(p, 'sk-access-m-0001');
      const keys = await redisAuthed(redis.port, [PW], ['KEYS', `${PREFIX}{*`]);
      assert.ok(keys.length >= 1, 'no lane key in Redis after requests through an AUTH store');
      const st = await (await request(`http://127.0.0.1:${aport}/status`, { timeout_ms: 5000 })).text();
      assert.ok(!st.includes(PW), '/status shows the password');
      assert.ok(!p.stderr().includes(PW), 'the log shows the password');

      const p2 = await startWithEnv(t, mock, {
        store: storeConf(redis.address, { username: 'pacer' }), plans: { default: { max_requests_per_second: 100 } },
      }, { PACERD_STORE_PASSWORD: USERPW });
      await decidedInRedis(p2, 'sk-access-m-0002');
      assert.ok(!p2.stderr().includes(USERPW), 'the log shows the ACL password');

      const f = path.join(t.dir, 'store-m-check.yaml');
      fs.writeFileSync(f, toYaml({ listen: '127.0.0.1:1', admin: { listen: '' }, store: storeConf(redis.address, { password_file: pwFile }) }));
      const c = await t.runPacerd(['--check-config', f]);
      assert.equal(c.code, 0, c.stderr);
      assert.match(c.stdout, new RegExp(`password from ${pwFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), c.stdout);
      assert.ok(!c.stdout.includes(PW) && !c.stderr.includes(PW), '--check-config printed the password');
      const g = path.join(t.dir, 'store-m-check-env.yaml');
      fs.writeFileSync(g, toYaml({ listen: '127.0.0.1:1', admin: { listen: '' }, store: storeConf(redis.address, { username: 'pacer' }) }));
      const c2 = await t.runPacerd(['--check-config', g], { env: { PACERD_STORE_PASSWORD: USERPW } });
      assert.equal(c2.code, 0, c2.stderr);
      assert.match(c2.stdout, /password from PACERD_STORE_PASSWORD \(ACL user\)/, c2.stdout);
      assert.ok(!c2.stdout.includes(USERPW), '--check-config printed the ACL password');

      const bad = await refusesToStart(t, mock, storeConf(redis.address), /AUTH/, { PACERD_STORE_PASSWORD: 'not-the-password-77' });
      assert.ok(!bad.stderr.includes('not-the-password-77'), 'the refusal shows the wrong password');
      await refusesToStart(t, mock, storeConf(redis.address, { username: 'pacer' }), /AUTH/, { PACERD_STORE_PASSWORD: PW });
      // no password at all against a Redis that wants one: refused as well (scripts: NOAUTH)
      await refusesToStart(t, mock, storeConf(redis.address), /NOAUTH|AUTH/);
    },
  },
  {
    // n. TLS to Redis (redis-server's tls-port, a throwaway CA). The CA in tls.ca_file:
    // decisions in Redis over TLS (127.0.0.1, checked as an IP; and localhost with the
    // name checked), with a client certificate where Redis asks for one. A CA that did not
    // sign the server's certificate, or a server_name the certificate does not carry:
    // pacerd refuses to start, naming the verification.
    name: 'n. TLS: verified against ca_file (IP and name), client certificate; a wrong CA and a server-name mismatch refused at start',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const certs = makeCerts(path.join(t.dir, 'redis-tls'));
      const client = makeClientCert(certs);
      const other = makeCerts(path.join(t.dir, 'other-ca'));
      const redis = await startTlsRedis(t, certs, { authClients: 'optional' });
      const tls = (over = {}) => ({ enabled: true, ca_file: certs.ca, ...over });
      const plan = { default: { max_requests_per_second: 100 } };
      const p = await startPacerdFor(t, mock, { store: storeConf(`127.0.0.1:${redis.tlsPort}`, { tls: tls() }), plans: plan });
      await decidedInRedis(p, 'sk-access-n-0001');
      assert.ok((await redis.keys(`${PREFIX}{openai:${keyHash('sk-access-n-0001')}*`)).length >= 1, 'no lane key after requests over TLS');
      const p2 = await startPacerdFor(t, mock, {
        store: storeConf(`localhost:${redis.tlsPort}`, { tls: tls({ cert_file: client.cert, key_file: client.key }) }), plans: plan,
      });
      await decidedInRedis(p2, 'sk-access-n-0002');
      // A Redis that requires a client certificate: without one it is refused, with one it works.
      const strict = await startTlsRedis(t, certs, { authClients: 'yes' });
      const p3 = await startPacerdFor(t, mock, {
        store: storeConf(`127.0.0.1:${strict.tlsPort}`, { tls: tls({ cert_file: client.cert, key_file: client.key }) }), plans: plan,
      });
      await decidedInRedis(p3, 'sk-access-n-0003');
      await refusesToStart(t, mock, storeConf(`127.0.0.1:${redis.tlsPort}`, { tls: tls({ ca_file: other.ca }) }), /certificate verify failed/);
      await refusesToStart(t, mock, storeConf(`127.0.0.1:${redis.tlsPort}`, { tls: tls({ server_name: 'redis.other.example' }) }),
        /certificate verify failed/);
      // plain TCP to the TLS port, or TLS to the plain port: not a verdict on the settings,
      // but the store never comes up (pacerd starts, down, serving locally)
      const p4 = await startPacerdFor(t, mock, { store: storeConf(redis.address, { tls: tls() }), plans: plan });
      await decidedInRedis(p4, 'sk-access-n-0004', 4);
      assert.equal(events(p4, 'store_connected').length, 0, storeEvents(p4));
    },
  },
  {
    // n2. A server that accepts and never answers (a TLS handshake that stalls, a
    // black-holed primary): the start-up check gives up after its 1 s, pacerd starts
    // with the store down and serves locally, and every connect is given up after
    // max(timeout_ms x 20, 1 s) and tried again (the silent server sees new connections)
    // instead of waiting for the kernel's minutes.
    name: 'n2. a Redis that accepts and never answers the TLS handshake: pacerd starts, serves locally, and connects again every second',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { headers: false } });
      const conns = [];
      const server = net.createServer((c) => { conns.push(Date.now()); c.on('error', () => {}); });
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      t.defer(() => new Promise((resolve) => { server.close(resolve); for (const c of server.connections ?? []) c.destroy(); }));
      const sockets = new Set();
      server.on('connection', (c) => { sockets.add(c); c.on('close', () => sockets.delete(c)); });
      t.defer(() => { for (const c of sockets) c.destroy(); });
      const t0 = Date.now();
      const p = await startPacerdFor(t, mock, {
        store: storeConf(`127.0.0.1:${server.address().port}`, { timeout_ms: 20, tls: { enabled: true } }),
        plans: { default: { max_requests_per_second: 100 } },
      });
      const started = Date.now() - t0;
      await decidedInRedis(p, 'sk-access-n2-0001', 4);
      await waitFor(() => conns.length >= 3, { timeout_ms: 4000 * SLOW, what: `three connects (${conns.length} so far)` });
      const gaps = conns.slice(1).map((c, i) => c - conns[i]);
      t.note(`n2: started in ${started} ms; connects ${gaps.join(', ')} ms apart`);
      assert.ok(gaps.every((g) => g >= 900 && g <= 2500 * SLOW), `connects ${gaps.join(', ')} ms apart`);
      assert.ok(events(p, 'store_unavailable').length >= 1, storeEvents(p));
      assert.equal(events(p, 'store_connected').length, 0, storeEvents(p));
    },
  },
];
