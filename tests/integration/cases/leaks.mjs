// SPDX-License-Identifier: Apache-2.0
// Nothing leaks: after clients leave at every stage (queued, waiting for the
// upstream's headers, mid-stream, mid-upload) pacerd's open file descriptors
// return to where they were. Memory is checked by valgrind / ASan runs of the
// whole suite (make valgrind, make test SAN=1).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { SLOW, request, sleep, waitFor } from '../lib.mjs';

const fdCount = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;

/** Opens a connection, sends `payload`, and closes it after `after_ms`. */
function hitAndLeave(port, payload, after_ms) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.write(payload);
      setTimeout(() => { s.destroy(); resolve(); }, after_ms);
    });
    s.on('error', () => resolve());
    s.resume();
  });
}

const chat = (extra = '') => {
  const body = JSON.stringify({ model: 'gpt-mock', stream: true, messages: [{ role: 'user', content: 'leak check' }] });
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`;
};

export const tests = [
  {
    name: 'clients leaving at every stage: pacerd ends with the file descriptors it started with',
    timeout_ms: 60000 * SLOW,
    fn: async (t) => {
      // A paced lane with few slots, so that some of the later requests queue.
      const p = await t.startPacerd({ config: { plans: { default: { max_requests_per_second: 50, max_concurrent: 8 } } } });
      // Warm up: the upstream connection pool fills to what 8 parallel requests need.
      await Promise.all(Array.from({ length: 8 }, () => request(`${p.url}/v1/models`)));
      await sleep(200);
      const base = fdCount(p.pid);
      const jobs = [];
      for (let i = 0; i < 40; i++) {
        jobs.push(hitAndLeave(p.port, chat('x-mock-delay-ms: 2000\r\n'), 20 + (i % 5) * 30)); // waiting for headers
        jobs.push(hitAndLeave(p.port, chat('x-mock-chunks: 50\r\nx-mock-chunk-ms: 20\r\n'), 100 + (i % 7) * 20)); // mid-stream
        jobs.push(hitAndLeave(p.port, 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\npartial', 30)); // mid-upload
        jobs.push(hitAndLeave(p.port, 'GET /v1/models HTTP/1.1\r\nHost: x\r\n', 30)); // mid-headers
      }
      await Promise.all(jobs);
      // Every request has been abandoned; give pacerd and the upstream a moment.
      let now = 0;
      await waitFor(async () => {
        now = fdCount(p.pid);
        return now <= base + 2;
      }, { timeout_ms: 10000 * SLOW, interval_ms: 200, what: `pacerd's fds to return to ${base} (+2)` }).catch((e) => {
        throw new Error(`${e.message}: ${now} open now, ${base} before`);
      });
      const r = await request(`${p.url}/v1/models`);
      assert.equal(r.status, 200);
      const st = await t.mock.stats();
      assert.equal(st.in_flight, 0, 'the mock still has requests in flight from clients that left');
    },
  },
];
