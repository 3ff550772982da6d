// SPDX-License-Identifier: Apache-2.0
// Streaming: SSE relayed chunk by chunk as it arrives, backpressure to a slow
// reader, and a client that leaves aborts the upstream transfer.
import assert from 'node:assert/strict';
import net from 'node:net';
import { SLOW, VALGRIND, recHeader, sleep, streamRequest, waitFor } from '../lib.mjs';

/** Collects SSE events ("\n\n"-terminated) with the time each one completed. */
function sseCollector() {
  let buf = '';
  const events = [];
  return {
    events,
    onChunk: (c, ms) => {
      buf += c.toString('utf8');
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        events.push({ text: buf.slice(0, i), ms });
        buf = buf.slice(i + 2);
      }
    },
  };
}

const chatBody = (extra = {}) => JSON.stringify({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'stream please' }], ...extra });

export const tests = [
  {
    // libevent #715: evhttp's read timeout keeps running while a response is
    // written, and would cut a long stream to a client that sends nothing.
    name: 'a stream longer than limits.client_timeout_s to a silent client completes; an idle connection is still closed',
    timeout_ms: 20000 * SLOW,
    fn: async (t) => {
      const p = await t.startPacerd({ config: { limits: { client_timeout_s: 1 } } });
      const sse = sseCollector();
      const r = await streamRequest(`${p.url}/v1/chat/completions`, {
        body: chatBody(),
        // Gaps longer than the timeout (a model thinking between chunks).
        headers: { 'content-type': 'application/json', 'x-mock-chunks': '3', 'x-mock-chunk-ms': '1600' },
        onChunk: sse.onChunk,
      });
      assert.equal(r.status, 200);
      await r.done;
      const content = sse.events.filter((e) => e.text.includes('"delta":{"content":"tok'));
      assert.equal(content.length, 3, 'the stream was cut in a gap longer than client_timeout_s');
      assert.equal(sse.events.at(-1).text, 'data: [DONE]');
      // The timeout itself still works: an idle keep-alive connection is closed.
      const sock = net.connect(p.port, '127.0.0.1');
      await new Promise((res, rej) => { sock.once('connect', res); sock.once('error', rej); });
      const t0 = Date.now();
      const closed = await new Promise((res) => {
        const timer = setTimeout(() => res(false), 5000 * SLOW);
        sock.once('close', () => { clearTimeout(timer); res(true); });
        sock.resume();
      });
      sock.destroy();
      assert.ok(closed, 'an idle client connection was not closed after client_timeout_s');
      const waited = Date.now() - t0;
      assert.ok(waited >= 800, `idle connection closed after ${waited} ms, before client_timeout_s (1 s)`);
    },
  },
  {
    name: 'SSE chunks arrive spread in time as the upstream sends them (5 x 300 ms)',
    fn: async (t) => {
      const p = await t.pacerd();
      const sse = sseCollector();
      const r = await streamRequest(`${p.url}/v1/chat/completions`, {
        body: chatBody(),
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test-stream', 'x-mock-chunks': '5', 'x-mock-chunk-ms': '300' },
        onChunk: sse.onChunk,
      });
      assert.equal(r.status, 200);
      assert.match(r.headers['content-type'], /^text\/event-stream/);
      assert.equal(r.headers['x-pacer-attempts'], '1');
      await r.done;
      const content = sse.events.filter((e) => e.text.includes('"delta":{"content":"tok'));
      assert.equal(content.length, 5, `content events: ${sse.events.map((e) => e.text.slice(0, 80)).join(' | ')}`);
      assert.equal(sse.events.at(-1).text, 'data: [DONE]');
      const spread = content[4].ms - content[0].ms;
      assert.ok(spread >= 800, `first and last content chunk arrived ${spread} ms apart (expected ~1200): buffered, not streamed`);
      const gaps = content.slice(1).map((e, i) => e.ms - content[i].ms);
      t.note(`gaps between content chunks: ${gaps.join(', ')} ms`);
      assert.ok(gaps.filter((g) => g >= 150).length >= 3, `gaps between chunks ${gaps.join(', ')} ms: chunks were batched`);
      const st = await t.mock.stats();
      assert.equal(st.streams_completed, 1);
      assert.equal(st.streams_aborted, 0);
    },
  },
  {
    name: 'Anthropic SSE stream through /anthropic/v1/messages: every event, in order',
    fn: async (t) => {
      const p = await t.pacerd();
      const sse = sseCollector();
      const r = await streamRequest(`${p.url}/anthropic/v1/messages`, {
        body: JSON.stringify({ model: 'claude-mock', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hi there, stream' }] }),
        headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test-stream', 'anthropic-version': '2023-06-01', 'x-mock-chunks': '4', 'x-mock-chunk-ms': '50' },
        onChunk: sse.onChunk,
      });
      assert.equal(r.status, 200);
      assert.match(r.headers['content-type'], /^text\/event-stream/);
      await r.done;
      const names = sse.events.map((e) => /^event: (\S+)/.exec(e.text)?.[1]);
      assert.deepEqual(names, ['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta',
        'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
      const rec = await t.mock.onlyRequest();
      assert.equal(rec.uri, '/v1/messages');
      assert.equal(recHeader(rec, 'x-api-key'), 'sk-ant-test-stream');
      assert.equal(recHeader(rec, 'anthropic-version'), '2023-06-01');
    },
  },
  {
    name: 'slow reader of a ~100 MB stream: pacerd RSS stays < 60 MB above its baseline',
    timeout_ms: 60000,
    fn: async (t) => {
      // A pacerd of its own: under AddressSanitizer (make test SAN=1) freed memory sits in
      // a 256 MB quarantine and would count as growth; without ASan the variable is inert.
      const asan = [process.env.ASAN_OPTIONS, 'quarantine_size_mb=0', 'thread_local_quarantine_size_kb=0'].filter(Boolean).join(':');
      const p = await t.startPacerd({ env: { ASAN_OPTIONS: asan } });
      const chunks = VALGRIND ? 16 : 100;
      const chunkBytes = 1024 * 1024;
      // Baseline after a first small stream, so that lazily allocated pools count in it.
      const warm = await streamRequest(`${p.url}/v1/chat/completions`, { body: chatBody(), headers: { 'x-mock-chunks': '3', 'x-mock-chunk-bytes': '65536' } });
      await warm.done;
      await t.mock.reset();
      const base = p.rssKiB();
      let max = base;
      const sampler = setInterval(() => { try { max = Math.max(max, p.rssKiB()); } catch { /* exited */ } }, 50);
      let received = 0;
      let tailText = '';
      try {
        const r = await streamRequest(`${p.url}/v1/chat/completions`, {
          body: chatBody(),
          headers: { 'x-mock-chunks': String(chunks), 'x-mock-chunk-bytes': String(chunkBytes) },
          timeout_ms: 60000,
          onChunk: (c) => { received += c.length; tailText = (tailText + c.toString('latin1')).slice(-64); },
        });
        t.defer(() => r.req.destroy());
        assert.equal(r.status, 200);
        // Slow reader: paused for 1.5 s, then short reads separated by long pauses.
        r.res.pause();
        await sleep(1500);
        const midStats = await t.mock.stats();
        assert.equal(midStats.streams_completed, 0, 'the mock finished the stream while the client was paused: pacerd buffered it');
        for (let i = 0; i < 6; i++) {
          r.res.resume();
          await sleep(20);
          r.res.pause();
          await sleep(150);
        }
        r.res.resume();
        await r.done;
      } finally {
        clearInterval(sampler);
      }
      const grewMiB = (max - base) / 1024;
      t.note(`pacerd RSS: baseline ${(base / 1024).toFixed(1)} MiB, max ${(max / 1024).toFixed(1)} MiB, ${(received / 1048576).toFixed(0)} MiB relayed`);
      assert.ok(received > chunks * chunkBytes, `received ${received} bytes, expected more than ${chunks * chunkBytes}`);
      assert.match(tailText, /data: \[DONE\]\n\n$/);
      assert.ok(grewMiB < 60, `pacerd RSS grew by ${grewMiB.toFixed(1)} MiB (baseline ${(base / 1024).toFixed(1)} MiB) while relaying to a slow reader`);
      const st = await t.mock.stats();
      assert.equal(st.streams_completed, 1);
      assert.equal(st.streams_aborted, 0);
    },
  },
  {
    name: 'client disconnects mid-stream: the upstream stream is aborted within 2 s',
    fn: async (t) => {
      const p = await t.pacerd();
      const inFlight0 = (await t.mock.stats()).in_flight;
      let gotContent;
      const first = new Promise((r) => { gotContent = r; });
      const r = await streamRequest(`${p.url}/v1/chat/completions`, {
        body: chatBody(),
        headers: { 'x-mock-chunks': '100', 'x-mock-chunk-ms': '100' },
        onChunk: (c) => { if (c.includes('tok')) gotContent(); },
      });
      t.defer(() => r.req.destroy());
      assert.equal(r.status, 200);
      await Promise.race([first, sleep(3000 * SLOW)]);
      assert.equal((await t.mock.stats()).streams_aborted, 0);
      r.req.destroy();
      const t0 = Date.now();
      await waitFor(async () => (await t.mock.stats()).streams_aborted === 1, { timeout_ms: 2000 * SLOW, interval_ms: 50, what: 'mock streams_aborted == 1' });
      const st = await t.mock.stats();
      assert.equal(st.streams_completed, 0);
      assert.ok(Date.now() - t0 < 2000 * SLOW);
      await waitFor(async () => (await t.mock.stats()).in_flight === inFlight0, { timeout_ms: 2000 * SLOW, what: `mock in_flight back to ${inFlight0}` });
      assert.ok(p.alive, 'pacerd still running');
    },
  },
  {
    name: 'client disconnects before the response headers: the upstream request is aborted within 2 s',
    fn: async (t) => {
      const p = await t.pacerd();
      const body = chatBody();
      const inFlight0 = (await t.mock.stats()).in_flight;
      const sock = net.connect({ host: '127.0.0.1', port: p.port });
      t.defer(() => sock.destroy());
      let answered = false;
      sock.on('data', () => { answered = true; });
      sock.on('error', () => {});
      sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `x-mock-delay-ms: 5000\r\nx-mock-chunks: 3\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      await waitFor(async () => (await t.mock.stats()).in_flight === inFlight0 + 1, { timeout_ms: 2000 * SLOW, what: 'the request to reach the mock' });
      await sleep(100);
      assert.equal(answered, false, 'response bytes arrived before the upstream answered');
      // Close the client's socket while pacerd waits for the upstream's first byte.
      sock.destroy();
      await waitFor(async () => (await t.mock.stats()).streams_aborted === 1, { timeout_ms: 2000 * SLOW, interval_ms: 50, what: 'mock streams_aborted == 1' });
      assert.equal((await t.mock.stats()).streams_completed, 0);
      assert.ok(p.alive);
    },
  },
  // The upstream breaking off mid-body (reset, idle timeout): faults.mjs.
];
