// SPDX-License-Identifier: Apache-2.0
// Upstream faults (issue 10), one case each: what the client sees, exactly, and
// the log line that explains it. Each test adds a line to the catalogue printed
// by the last test (`fault: case -> status/code -> log event`); docs/usage.md "Faults"
// holds the same table.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ROOT, SLOW, VALGRIND, assertPacerError, rawHttp, request, sleep, waitFor } from '../lib.mjs';

const catalogue = [];
function record(_t, fault, answer, log) {
  const line = `fault: ${fault} -> ${answer} -> ${log}`;
  catalogue.push(line);
}

const events = (p, name) => p.logs().filter((l) => l.event === name);

/** The one `request` log line of a request, by the x-request-id pacerd answered with. */
async function requestLine(p, id) {
  return waitFor(() => p.logs().find((l) => l.event === 'request' && l.request_id === id),
    { timeout_ms: 3000, what: `the request log line of ${id}` });
}

const fast = (over = {}) => ({ retry: { initial_delay_ms: 50, max_delay_ms: 100, ...over } });
const chat = (extra = {}) => JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }], ...extra });

/** A raw POST /v1/chat/completions read until pacerd closes the connection. */
function rawChat(p, headers, body) {
  const h = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  return rawHttp(p.port,
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${h}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    { timeout_ms: 8000, untilClose: true });
}

export const tests = [
  {
    name: 'reset before the headers: retried up to retry.max_attempts (3 upstream attempts), then 502 upstream_unreachable; retry lines say reset_before_headers, the request line max_attempts',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: fast({ max_attempts: 3 }) } } });
      const r = await request(`${p.url}/v1/chat/completions`, { method: 'POST', body: chat(), headers: { 'x-mock-reset': 'headers' } });
      const e = assertPacerError(r, 502, 'upstream_unreachable');
      assert.match(e.message, /reset/);
      assert.equal(r.headers['x-pacer-attempts'], '3');
      assert.equal((await t.mock.requests()).length, 3, 'three attempts reached the upstream');
      const id = r.headers['x-request-id'];
      const line = await requestLine(p, id);
      assert.equal(line.status, 502);
      assert.equal(line.attempts, 3);
      assert.equal(line.error, 'upstream_unreachable');
      assert.equal(line.upstream_error, 'reset');
      assert.equal(line.retry_stop, 'max_attempts', JSON.stringify(line));
      const retries = events(p, 'retry').filter((l) => l.request_id === id);
      assert.deepEqual(retries.map((l) => [l.attempt, l.upstream_error, l.class, l.reason]),
        [[1, 'reset', 'transient', 'reset_before_headers'], [2, 'reset', 'transient', 'reset_before_headers']]);
      record(t, 'reset before headers', '502 upstream_unreachable after retry.max_attempts',
        'retry {reason: reset_before_headers} × (max_attempts-1); request {upstream_error: reset, retry_stop: max_attempts}');
    },
  },
  {
    name: 'reset mid-stream, chunked: the chunks that arrived, no terminating 0-chunk, connection closed; request line truncated: true',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: fast() } } });
      const r = await rawChat(p, { 'x-mock-reset': 'body', 'x-request-id': 'fault-reset-chunked' }, chat({ stream: true }));
      assert.equal(r.why, 'closed', `the connection was not closed (${r.why})`);
      assert.equal(r.status, 200);
      assert.match(r.headers['transfer-encoding'] ?? '', /chunked/);
      assert.equal(r.complete, false, `a reset stream was relayed as complete: ${r.raw.toString('latin1').slice(-200)}`);
      assert.ok(!/\r\n0\r\n\r\n$/.test(r.raw.toString('latin1')), 'a terminating 0-chunk was sent');
      assert.match(r.body.toString(), /^data: /, 'the first chunk was relayed');
      assert.ok(!r.body.toString().includes('[DONE]'));
      assert.equal((await t.mock.requests()).length, 1, 'a stream that has begun is never retried');
      const line = await requestLine(p, 'fault-reset-chunked');
      assert.equal(line.status, 200);
      assert.equal(line.attempts, 1);
      assert.equal(line.truncated, true, JSON.stringify(line));
      assert.equal(line.upstream_error, 'reset');
      assert.ok(line.bytes > 0 && line.bytes === r.body.length, `bytes ${line.bytes}, client got ${r.body.length}`);
      record(t, 'reset mid-stream (chunked)', '200, stream cut: no 0-chunk, connection closed',
        'request {truncated: true, upstream_error: reset}');
    },
  },
  {
    name: 'reset mid-body, content-length: fewer bytes than announced and the connection closed; request line truncated: true',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: fast() } } });
      const r = await rawChat(p, { 'x-mock-reset': 'body', 'x-request-id': 'fault-reset-cl' }, chat());
      assert.equal(r.why, 'closed', `the connection was not closed (${r.why})`);
      assert.equal(r.status, 200);
      const n = Number(r.headers['content-length']);
      assert.ok(n > 0, `no content-length: ${JSON.stringify(r.headers)}`);
      assert.equal(r.headers['transfer-encoding'], undefined);
      assert.equal(r.complete, false);
      assert.ok(r.body.length < n, `got ${r.body.length} of ${n} bytes`);
      assert.ok(r.body.length > 0, 'the first half was relayed');
      const line = await requestLine(p, 'fault-reset-cl');
      assert.equal(line.status, 200);
      assert.equal(line.truncated, true, JSON.stringify(line));
      assert.equal(line.upstream_error, 'reset');
      assert.equal(line.bytes, r.body.length);
      record(t, 'reset mid-body (content-length)', '200, fewer bytes than content-length, connection closed',
        'request {truncated: true, upstream_error: reset}');
    },
  },

  {
    name: 'hang before the headers: timeouts.first_byte_s 1 fires after ~1 s: 504 upstream_timeout naming it; request line upstream_error timeout; the upstream request is closed',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: fast({ max_attempts: 1 }) }, providers: { openai: { timeouts: { first_byte_s: 1 } } } } });
      const inFlight0 = (await t.mock.stats()).in_flight;
      const t0 = Date.now();
      const r = await request(`${p.url}/v1/models`, { headers: { 'x-mock-hang': 'headers' }, timeout_ms: 8000 });
      const ms = Date.now() - t0;
      const e = assertPacerError(r, 504, 'upstream_timeout');
      assert.match(e.message, /timeouts\.first_byte_s/);
      assert.ok(ms >= 800 && ms < 3000 * SLOW, `answered after ${ms} ms, expected ~1000`);
      const line = await requestLine(p, r.headers['x-request-id']);
      assert.equal(line.status, 504);
      assert.equal(line.error, 'upstream_timeout');
      assert.equal(line.upstream_error, 'timeout');
      assert.match(line.upstream_detail, /timeouts\.first_byte_s/);
      assert.equal(line.retry_stop, 'max_attempts');
      await waitFor(async () => (await t.mock.stats()).in_flight === inFlight0, { timeout_ms: 2000 * SLOW, what: 'the hung upstream request to be closed by pacerd' });
      assert.equal((await request(`${p.url}/v1/models`, { timeout_ms: 3000 })).status, 200, 'pacerd serves the next request');
      record(t, 'hang before headers', `504 upstream_timeout after timeouts.first_byte_s (${ms} ms for 1 s)`,
        'request {upstream_error: timeout, upstream_detail: "… timeouts.first_byte_s"}');
    },
  },
  {
    name: 'hang mid-stream: timeouts.idle_s 1 cuts the stream after ~1 s: no 0-chunk, connection closed; request line truncated, upstream_error timeout naming idle_s',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: fast() }, providers: { openai: { timeouts: { idle_s: 1 } } } } });
      const t0 = Date.now();
      const r = await rawChat(p, { 'x-mock-hang': 'body', 'x-request-id': 'fault-hang-body' }, chat({ stream: true }));
      const ms = Date.now() - t0;
      assert.equal(r.why, 'closed', `the connection was not closed (${r.why})`);
      assert.equal(r.status, 200);
      assert.equal(r.complete, false, 'a stalled stream must not look complete');
      assert.match(r.body.toString(), /^data: /, 'the chunk sent before the stall was relayed');
      assert.ok(ms >= 800 && ms < 3000 * SLOW, `cut after ${ms} ms, expected ~1000 (idle_s: 1)`);
      assert.equal((await t.mock.requests()).length, 1);
      const line = await requestLine(p, 'fault-hang-body');
      assert.equal(line.status, 200);
      assert.equal(line.truncated, true, JSON.stringify(line));
      assert.equal(line.upstream_error, 'timeout');
      assert.match(line.upstream_detail, /timeouts\.idle_s/);
      const ab = events(p, 'upstream_aborted').find((l) => l.request_id === 'fault-hang-body');
      assert.ok(ab && ab.upstream_error === 'timeout', 'an upstream_aborted line with the request id');
      record(t, 'hang mid-stream', `200, stream cut after timeouts.idle_s (${ms} ms for 1 s), no 0-chunk, closed`,
        'upstream_aborted + request {truncated: true, upstream_error: timeout, upstream_detail: "… timeouts.idle_s"}');
    },
  },
  {
    name: 'a host name that does not resolve (system resolver, NXDOMAIN): retried like a refused connect, then 502 upstream_unreachable naming the resolve failure; retry and request lines say upstream_error resolve',
    fn: async (t) => {
      const p = await t.startPacerd({
        config: {
          plans: { default: fast({ max_attempts: 2 }) },
          providers: { nodns: { upstream: 'http://pacerd-test.invalid:80', prefix: '/nodns' } },
        },
      });
      const r = await request(`${p.url}/nodns/v1/models`, { headers: { 'x-request-id': 'fault-dns' }, timeout_ms: 10000 });
      const e = assertPacerError(r, 502, 'upstream_unreachable');
      assert.match(e.message, /resolve/i);
      assert.match(e.message, /pacerd-test\.invalid/);
      assert.equal(r.headers['x-pacer-attempts'], '2', 'a failed lookup is retried like a refused connect');
      const line = await requestLine(p, 'fault-dns');
      assert.equal(line.upstream_error, 'resolve');
      assert.match(line.upstream_detail, /resolve host/i);
      const retries = events(p, 'retry').filter((l) => l.request_id === 'fault-dns');
      assert.deepEqual(retries.map((l) => [l.upstream_error, l.reason]), [['resolve', 'connect_error']]);
      record(t, 'DNS name does not resolve', '502 upstream_unreachable "resolve (Could not resolve host: …)"',
        'retry {upstream_error: resolve}; request {upstream_error: resolve}');
    },
  },
  {
    // libcurl here (7.88, Debian) is built with AsynchDNS, the threaded resolver (no
    // c-ares): getaddrinfo runs in a thread of its own. The shim (preload/slowdns.c)
    // makes a lookup take 1.5 s: a synchronous resolver would stall every other
    // request for as long.
    name: 'a DNS lookup that takes 1.5 s does not block the loop: another provider answers at once meanwhile; then 502 naming the resolve failure',
    timeout_ms: 20000,
    fn: async (t) => {
      const so = path.join(t.dir, 'slowdns.so');
      execFileSync('cc', ['-std=c11', '-shared', '-fPIC', '-o', so, path.join(ROOT, 'tests/integration/preload/slowdns.c'), '-ldl']);
      const asan = [process.env.ASAN_OPTIONS, 'verify_asan_link_order=0'].filter(Boolean).join(':');
      const p = await t.startPacerd({
        env: { LD_PRELOAD: so, SLOWDNS_MS: '1500', ASAN_OPTIONS: asan },
        config: {
          plans: { default: fast({ max_attempts: 1 }) },
          providers: { slowdns: { upstream: 'http://pacerd-test.slow.invalid:80', prefix: '/slowdns', timeouts: { connect_s: 10 } } },
        },
      });
      assert.equal((await request(`${p.url}/v1/models`)).status, 200, 'warm-up');
      const t0 = Date.now();
      const bad = request(`${p.url}/slowdns/v1/models`, { headers: { 'x-request-id': 'fault-slowdns' }, timeout_ms: 10000 })
        .then((r) => ({ r, ms: Date.now() - t0 }));
      const lat = [];
      while (Date.now() - t0 < 1200) {
        const r = await request(`${p.url}/v1/models`, { timeout_ms: 3000 });
        assert.equal(r.status, 200);
        lat.push(r.ms);
        await sleep(50);
      }
      const { r, ms } = await bad;
      const e = assertPacerError(r, 502, 'upstream_unreachable');
      assert.match(e.message, /resolve/);
      assert.ok(ms >= 1400, `the lookup took ${ms} ms: the shim did not slow it`);
      assert.ok(lat.length >= 5, `only ${lat.length} requests during the lookup`);
      const worst = Math.max(...lat);
      // Under valgrind each request is slower, but a loop blocked by the 1.5 s lookup
      // would still show one latency above a second.
      const bound = VALGRIND ? 1000 : 300;
      assert.ok(worst < bound, `latencies of the other provider during the lookup: ${lat.join(', ')} ms (one >= ${bound})`);
      const line = await requestLine(p, 'fault-slowdns');
      assert.equal(line.upstream_error, 'resolve');
      t.note(`${lat.length} requests during a ${ms} ms lookup, worst ${worst} ms`);
      record(t, 'slow DNS lookup (1.5 s)', `other lanes unaffected (worst ${worst} ms); then 502 upstream_unreachable`,
        'request {upstream_error: resolve}');
    },
  },
  {
    name: 'https upstream whose certificate is not trusted (no tls.ca_file): 502 upstream_unreachable naming the verification failure, at once: not retried, x-should-retry: false; request line upstream_error tls_verify',
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: { retry: { max_attempts: 3 } } }, providers: { securemock: { tls: null } } } });
      const r = await request(`${p.url}/secure/v1/models`, { headers: { 'x-request-id': 'fault-tls' } });
      const e = assertPacerError(r, 502, 'upstream_unreachable');
      assert.match(e.message, /tls_verify/);
      assert.match(e.message, /certificate/i);
      // Every attempt would fail the same way (default backoff: 1 s, then 2 s, for nothing).
      assert.equal(r.headers['x-pacer-attempts'], '1');
      assert.equal(r.headers['x-should-retry'], 'false');
      assert.ok(r.ms < 1000 * SLOW, `answered after ${r.ms} ms`);
      assert.deepEqual(await t.mock.requests(), [], 'the mock answered a request over an untrusted connection');
      const line = await requestLine(p, 'fault-tls');
      assert.equal(line.status, 502);
      assert.equal(line.attempts, 1);
      assert.equal(line.upstream_error, 'tls_verify');
      assert.match(line.upstream_detail, /certificate/i);
      assert.equal(events(p, 'retry').length, 0);
      record(t, 'TLS verification failure', '502 upstream_unreachable "tls_verify (SSL certificate problem: …)", 1 attempt, x-should-retry: false',
        'request {upstream_error: tls_verify, upstream_detail: "SSL certificate problem: …"}');
    },
  },
  {
    name: 'a storm of 500 and 502: every request makes exactly retry.max_attempts upstream calls, no more; the client gets the last answer',
    timeout_ms: 20000,
    fn: async (t) => {
      const p = await t.startPacerd({ config: { plans: { default: fast({ max_attempts: 3 }) } } });
      const n = 20;
      const rs = await Promise.all(Array.from({ length: n }, (_, i) => request(`${p.url}/v1/chat/completions`, {
        method: 'POST', body: chat(), timeout_ms: 10000,
        headers: { 'x-mock-status': i % 2 ? '502' : '500', 'x-request-id': `fault-storm5xx-${i}` },
      })));
      for (const [i, r] of rs.entries()) {
        assert.equal(r.status, i % 2 ? 502 : 500);
        assert.equal(r.headers['x-pacer-attempts'], '3');
        assert.notEqual(r.json().error?.type, 'pacer_error', 'the upstream answer is relayed');
      }
      const calls = (await t.mock.requests()).length;
      assert.equal(calls, 3 * n, `${calls} upstream calls for ${n} requests with max_attempts 3`);
      for (let i = 0; i < n; i++) {
        const line = await requestLine(p, `fault-storm5xx-${i}`);
        assert.equal(line.attempts, 3);
        assert.equal(line.retry_stop, 'max_attempts');
      }
      const retries = events(p, 'retry');
      assert.equal(retries.length, 2 * n, 'two retry lines per request');
      assert.ok(retries.every((l) => l.class === 'transient' && [500, 502].includes(l.status_code)), JSON.stringify(retries[0]));
      record(t, 'storm of 500/502', `the last 500/502 relayed; ${calls} upstream calls for ${n} requests (= max_attempts each)`,
        'retry {class: transient, reason: status_50x}; request {attempts: 3, retry_stop: max_attempts}');
    },
  },
  {
    // DESIGN §3: capacity answers are retried until the request's deadline, and a retry
    // waits without a slot, then passes the lane's gates like any request. A lane under a
    // storm of 503s halves its concurrency and spaces its dispatches ×1.5 per refusal, so
    // the storm does not multiply: far fewer upstream calls than requests × attempts.
    name: 'a storm of 503 (capacity) on 30 concurrent requests: retried until retry.deadline_s and answered by then; the lane holds: the retries of the storm are the few dispatches of the lane, not requests × attempts',
    timeout_ms: 30000,
    fn: async (t) => {
      const deadline_s = 3;
      const max_wait_s = 5;
      const p = await t.startPacerd({
        config: { plans: { default: { retry: { deadline_s, initial_delay_ms: 200, max_delay_ms: 400 }, queue: { max_wait_s } } } },
      });
      const n = 30;
      const t0 = Date.now();
      const rs = await Promise.all(Array.from({ length: n }, (_, i) => request(`${p.url}/v1/chat/completions`, {
        method: 'POST', body: chat(), timeout_ms: 15000,
        headers: { 'x-mock-status': '503', 'x-request-id': `fault-storm503-${i}` },
      }).then((r) => ({ r, ms: Date.now() - t0 }))));
      const calls = (await t.mock.requests()).length;
      const attempts = rs.map(({ r }) => Number(r.headers['x-pacer-attempts']));
      assert.equal(calls, attempts.reduce((a, b) => a + b, 0), 'every upstream call is one of the attempts the clients were told of');
      // Without the lane's hold each request would retry every 0.2-0.9 s until its deadline:
      // 4-15 attempts each. With it the retries of the whole storm are the lane's few
      // dispatches in deadline_s (spaced 0.1 s × 1.5^k: about 7 in 3 s), not n × attempts.
      assert.ok(calls <= n + 12, `${calls} upstream calls for ${n} requests`);
      let relayed = 0;
      let retried = 0;
      for (const [i, { r, ms }] of rs.entries()) {
        const line = await requestLine(p, `fault-storm503-${i}`);
        if (attempts[i] === 0) {
          // Never sent: the lane held it past queue.max_wait_s (the ETA was fine on arrival).
          assertPacerError(r, 504, 'queue_timeout');
          assert.ok(ms >= max_wait_s * 1000 - 200 && ms < (max_wait_s + 2) * 1000 * SLOW, `queue_timeout after ${ms} ms`);
          continue;
        }
        relayed++;
        assert.equal(r.status, 503, 'the upstream 503 is relayed');
        assert.notEqual(r.json().error?.type, 'pacer_error');
        assert.equal(line.retry_stop, 'deadline', JSON.stringify(line));
        if (attempts[i] >= 2) {
          retried++;
          // A retry waiting in the held lane is answered at its deadline, not queue.max_wait_s later.
          assert.ok(ms < (deadline_s + 1) * 1000 * SLOW, `request ${i} (${attempts[i]} attempts) answered after ${ms} ms, deadline ${deadline_s} s`);
        }
      }
      assert.ok(relayed >= 1 && retried >= 1, `relayed ${relayed}, retried ${retried}`);
      const retries = events(p, 'retry');
      assert.ok(retries.every((l) => l.class === 'capacity' && l.reason === 'status_503'), JSON.stringify(retries[0]));
      assert.ok(events(p, 'concurrency_changed').length >= 1, 'the lane lowered its concurrency');
      t.note(`${calls} upstream calls for ${n} requests; attempts ${attempts.join(',')}`);
      record(t, 'storm of 503 (capacity)', `the last 503 relayed at retry.deadline_s (never-sent ones: 504 queue_timeout); ${calls} upstream calls for ${n} requests`,
        'retry {class: capacity, reason: status_503}; concurrency_changed; request {retry_stop: deadline}');
    },
  },
];

export const catalogueTest = {
  name: 'catalogue',
  fn: async (t) => {
    for (const l of catalogue) t.note(`  ${l}`);
  },
};
tests.push(catalogueTest);
