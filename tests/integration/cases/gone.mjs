// SPDX-License-Identifier: Apache-2.0
// A client that has gone is never forwarded: requests wait in a paced lane, their
// clients give up while they wait, and none of those requests may reach the upstream
// after its client left.
import assert from 'node:assert/strict';
import net from 'node:net';
import { SLOW, recHeader, request, sleep } from '../lib.mjs';

// One lane paced at 5 requests/s; one attempt per request.
// Run apart under run.mjs --jobs: it measures 2 ms of slack between a client leaving and
// its request. Light (a lane paced at 5/s, 30 clients that mostly wait, 1.3 s of CPU in
// 20 s): beside other light timing tests only.
export const alone = 'light';

export const config = {
  plans: { default: { max_requests_per_second: 5, retry: { max_attempts: 1 } } },
};

// How long after its client's give-up a request may still be recorded by the mock.
// Zero is unattainable by any implementation: the head of the lane's FIFO queue is by
// construction the request closest to its client's 100-ms give-up, so a dispatch and
// a give-up often fall within the forward path's latency of each other (pacerd writes
// the request before the client's FIN can reach it, the mock records it a fraction of
// a millisecond later). Measured on the 2-core machine: such pairs differ by 0.1-0.7
// ms. A request forwarded when pacerd could have known its client had left (its FIN
// waiting on the socket: pacerd asks the socket at dispatch), or forwarded at a later
// dispatch, is later than this. The 2 ms are the issue's figure: the loop's and the
// clocks' granularity (a turn, the mock's read of the request). The client has left
// once its close returned (closedUs, taken after it: the FIN is on its way then);
// abortUs, taken just before, is what the notes measure from. The two are a few µs
// apart, unless the client's own process was not scheduled in between (seen on a
// loaded machine: then the FIN leaves later than abortUs says).
const SLACK_MS = 2;
const RUNS = 5;

/** CLOCK_MONOTONIC in µs: the clock of the mock's t_mono_us (libuv's hrtime is CLOCK_MONOTONIC). */
const monoUs = () => Number(process.hrtime.bigint() / 1000n);

/**
 * One attempt: a request on a new connection, given up (socket destroyed) after
 * give_up_ms unless its answer is complete by then. Resolves with
 * {id, answered, status, abortUs, closedUs}: abortUs is taken just before the
 * destroy, before pacerd can possibly see the client leave, closedUs just after
 * (libuv closes the socket at once: its FIN has left).
 */
function attempt(port, id, give_up_ms) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let buf = '';
    let settled = false;
    const settle = (v) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ id, ...v, closedUs: monoUs() });
    };
    const timer = setTimeout(() => settle({ answered: false, abortUs: monoUs() }), give_up_ms * SLOW);
    s.on('connect', () => s.write(`GET /echo/gone/${id} HTTP/1.1\r\nHost: x\r\nx-request-id: ${id}\r\n\r\n`));
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.slice(0, end);
      const len = /\r\ncontent-length: *(\d+)/i.exec(head);
      if (len && buf.length >= end + 4 + Number(len[1])) settle({ answered: true, status: Number(head.slice(9, 12)) });
    });
    s.on('error', () => {});
    s.on('close', () => settle({ answered: false, closedByServer: true, abortUs: monoUs() }));
  });
}

/** One client: `n` attempts, each given up after 100 ms, the next 200 ms later. */
async function client(port, run, c, n) {
  await sleep(Math.floor(Math.random() * 300)); // spread the clients over a cycle
  const out = [];
  for (let a = 0; a < n; a++) {
    out.push(await attempt(port, `gone-${run}-${c}-${a}`, 100));
    await sleep(200);
  }
  return out;
}

export const tests = [
  {
    name: `30 clients × 8 attempts given up after 100 ms, lane paced at 5/s: no request reaches the upstream after its client left (${SLACK_MS} ms slack; ${RUNS} runs)`,
    timeout_ms: 90000,
    fn: async (t) => {
      const p = await t.pacerd();
      const notes = [];
      for (let run = 0; run < RUNS; run++) {
        await t.mock.reset();
        const started = Date.now();
        const clients = await Promise.all(Array.from({ length: 30 }, (_, c) => client(p.port, run, c, 8)));
        const elapsed_s = (Date.now() - started) / 1000;
        const attempts = new Map(clients.flat().map((a) => [a.id, a]));
        // A request forwarded late would show up now: give the lane time for a few dispatches.
        await sleep(1200);
        const recs = (await t.mock.requests()).filter((r) => r.uri.startsWith(`/echo/gone/gone-${run}-`));
        const late = [];
        let closest = Infinity;
        let forwardedThenGone = 0;
        for (const rec of recs) {
          const id = recHeader(rec, 'x-request-id');
          assert.equal(rec.uri, `/echo/gone/${id}`, 'the x-request-id recorded upstream is not the one sent with this URI');
          const a = attempts.get(id);
          assert.ok(a, `the upstream got a request nobody sent: ${id}`);
          assert.equal(typeof rec.t_mono_us, 'number', 'the mock records no t_mono_us (rebuild build/pacerd-mock)');
          if (a.answered) continue;
          forwardedThenGone++;
          const margin = a.abortUs - rec.t_mono_us; // > 0: reached the upstream before the client left
          closest = Math.min(closest, margin);
          if (a.closedUs - rec.t_mono_us < -SLACK_MS * 1000 * SLOW) {
            const said = p.logs().filter((l) => l.request_id === id).map((l) => `${l.event} ${l.ts}${l.status ? ` ${l.status}` : ''}`);
            late.push(`${id} reached the upstream ${((rec.t_mono_us - a.closedUs) / 1000).toFixed(1)} ms after its client's close returned ` +
              `(${((a.closedUs - a.abortUs) / 1000).toFixed(2)} ms after it began; pacerd: ${said.join('; ')})`);
          }
        }
        const all = [...attempts.values()];
        const answered = all.filter((a) => a.answered);
        const ids = new Set(recs.map((r) => recHeader(r, 'x-request-id')));
        // Answered ones must have been forwarded, once each.
        assert.equal(recs.length, ids.size, 'a request reached the upstream twice');
        for (const a of answered) {
          assert.ok(ids.has(a.id), `${a.id} was answered but the upstream never saw it`);
          assert.equal(a.status, 200, `${a.id}: status ${a.status}`);
        }
        // Dispatched by the lane (pacerd's debug line "acquired") but never sent: the
        // client was found gone at the last moment (its socket asked), answered 499.
        const acquired = new Set(p.logs().filter((l) => l.event === 'acquired' && attempts.has(l.request_id)).map((l) => l.request_id));
        const heldBack = [...acquired].filter((id) => !ids.has(id)).length;
        notes.push(`run ${run + 1}: ${all.length} attempts, ${answered.length} answered, ${recs.length} forwarded, ` +
          `${forwardedThenGone} forwarded and then given up (closest: ${Number.isFinite(closest) ? (closest / 1000).toFixed(2) : '-'} ms before the give-up; negative = after), ` +
          `${heldBack} dispatched but not sent (client gone)`);
        assert.deepEqual(late, [], `requests forwarded more than ${SLACK_MS} ms after their client had gone (${notes.at(-1)})`);
        // The lane was exercised: at 5/s over ~2.7 s (longer under valgrind, where
        // the give-up is scaled) some requests went through, and no more than the
        // pace allows over the time the clients ran (+1 for the burst, +1 slack).
        assert.ok(answered.length >= 3, `only ${answered.length} requests answered in run ${run + 1}: the scenario did not run`);
        const most = Math.ceil(elapsed_s * 5) + 2;
        assert.ok(answered.length <= most,
          `${answered.length} requests answered in ${elapsed_s.toFixed(1)} s through a lane paced at 5/s (at most ${most})`);
      }
      for (const n of notes) t.note(n);
      assert.equal((await request(`${p.url}/v1/models`)).status, 200);
    },
  },
];
