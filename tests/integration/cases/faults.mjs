// Upstream faults (issue 10), one case each: what the client sees, exactly, and
// the log line that explains it. Each test adds a line to the catalogue printed
// by the last test (`fault: case -> status/code -> log event`); README "Faults"
// holds the same table.
import assert from 'node:assert/strict';
import http from 'node:http';
import { SLOW, assertPacerError, rawHttp, request, sleep, waitFor } from '../lib.mjs';

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
];

export const catalogueTest = {
  name: 'catalogue',
  fn: async (t) => {
    for (const l of catalogue) t.note(`  ${l}`);
  },
};
tests.push(catalogueTest);
