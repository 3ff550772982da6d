// SPDX-License-Identifier: Apache-2.0
// WebSocket transports (issue 31): the Responses API's WebSocket mode through the
// official openai SDK (ResponsesWS, on the `ws` package), a Realtime-shaped socket,
// turns paced and metered inside the socket, refusals inside it, backpressure, and
// hostile input on raw sockets. The mock's endpoints: tests/mock/README.md "WebSocket".
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/beta/responses/ws';
import { SLOW, freePort, keyHash, request, sleep, waitFor } from '../lib.mjs';
import { startPacerdWithAdmin, toYaml } from '../load.mjs';
import { closeCode, fds, frame, messages, metrics, open, rawUpgrade, status, turn, turnLines, wsStats } from '../lib/ws.mjs';

export const tests = [
  {
    name: 'openai SDK ResponsesWS: 20 turns over one socket at 5 turns/s, 19 gaps >= 19 x 195 ms and none under 160 ms, usage corrects the token gate',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock();
      // 60,000 tokens a minute: a turn charged its estimate (~1,030 tokens: no
      // max_output_tokens) would hold the gate ~1 s; corrected by its usage (~20), not.
      const p = await startPacerdWithAdmin(t, mock, { plans: { default: { max_requests_per_second: 5, max_tokens_per_minute: 60000 } } });
      const client = new OpenAI({ apiKey: 'sk-ws-sdk-0001', baseURL: `${p.url}/v1`, maxRetries: 0 });
      const rws = new ResponsesWS(client);
      const done = [];
      const errors = [];
      rws.on('error', (e) => errors.push(e.message));
      const t0 = Date.now();
      await new Promise((resolve, reject) => {
        rws.on('event', (e) => {
          if (e.type !== 'response.completed') return;
          done.push(e.response.usage);
          if (done.length === 20) resolve();
          else rws.send({ type: 'response.create', model: 'gpt-mock', input: `turn ${done.length}` });
        });
        rws.on('close', (code) => reject(new Error(`closed ${code} after ${done.length} turns`)));
        rws.send({ type: 'response.create', model: 'gpt-mock', input: 'turn 0' });
      });
      const elapsed = Date.now() - t0;
      rws.close({ code: 1000, reason: 'done' });
      assert.deepEqual(errors, []);
      assert.equal(done.length, 20);
      const arrivals = (await wsStats(mock)).turn_list.map((r) => r.t_ms);
      assert.equal(arrivals.length, 20);
      // Paced at 200 ms: over the 19 gaps at least 19 × 195 ms, and no gap under 160 ms:
      // the mock reads an arrival up to ~30 ms late on a loaded machine (make test
      // SAN=1: 236 then 176 ms, two dispatches 200 ms apart), never early.
      const gaps = arrivals.slice(1).map((a, i) => a - arrivals[i]);
      assert.ok(Math.min(...gaps) >= 160, `gaps ${gaps.join(',')}`);
      assert.ok(arrivals[19] - arrivals[0] >= 19 * 195, `19 gaps in ${arrivals[19] - arrivals[0]} ms: ${gaps.join(',')}`);
      // Corrected: about 19 × 200 ms, not 19 × ~1 s.
      assert.ok(elapsed < 9000 * SLOW, `20 turns took ${elapsed} ms`);
      const lines = turnLines(p);
      assert.equal(lines.length, 20);
      lines.forEach((l, i) => {
        assert.equal(l.status, 200);
        assert.equal(l.key, keyHash('sk-ws-sdk-0001'));
        assert.equal(l.model, 'gpt-mock');
        assert.ok(l.tokens_estimated > 0, JSON.stringify(l));
        assert.equal(l.tokens, done[i].total_tokens, 'the usage of its response.completed');
      });
      // The first turn is charged its output as the default (1,024); the usage
      // refunds the difference, and the lane's output estimate follows what it saw.
      assert.ok(lines[0].tokens_estimated > 1000, JSON.stringify(lines[0]));
      assert.ok(lines.at(-1).tokens_estimated < 100, JSON.stringify(lines.at(-1)));
      // No ?model=: pacerd answered the upgrade itself, and the provider's socket
      // opened in the lane of the first response.create's model: 20 turns and the
      // opening there, no model-less lane for the key.
      const st = await status(p);
      const mine = st.lanes.filter((l) => l.key === keyHash('sk-ws-sdk-0001'));
      assert.deepEqual(mine.map((l) => l.model), ['gpt-mock'], JSON.stringify(mine.map((l) => l.model)));
      assert.equal(mine[0].counters.dispatched, 21);
      assert.equal(mine[0].in_flight, 0);
      const opened = p.logs().find((l) => l.event === 'websocket_open');
      assert.equal(opened.early, true);
      assert.ok(!JSON.stringify(p.logs()).includes('sk-ws-sdk-0001'), 'the key is never logged');
    },
  },
  {
    name: 'two sockets of one key share the lane; a rate-limit event holds both, and the refused turn is sent again',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { plans: { default: { max_requests_per_second: 5 } } });
      const a = await open(p, { headers: { 'x-mock-ws-refuse': '3', 'x-mock-ws-refuse-ms': '1500' } });
      const b = await open(p);
      // Shared budget: 3 turns each, interleaved, 5 a second between them.
      await Promise.all([(async () => { await turn(a); await turn(a); })(), (async () => { await turn(b); await turn(b); })()]);
      let rec = (await wsStats(mock)).turn_list;
      assert.equal(rec.length, 4);
      const gaps = rec.slice(1).map((r, i) => r.t_ms - rec[i].t_ms);
      assert.ok(Math.min(...gaps) >= 190, `gaps ${gaps.join(',')}`);
      assert.deepEqual(new Set(rec.map((r) => r.socket)).size, 2);
      // a's third turn is refused inside the socket ("try again in 1500ms").
      const aDone = turn(a, {}, { timeout_ms: 15000 });
      await waitFor(async () => (await wsStats(mock)).refused === 1, { timeout_ms: 5000 * SLOW, what: 'the refusal' });
      const refusedAt = (await wsStats(mock)).turn_list.at(-1).t_ms;
      const bDone = turn(b, {}, { timeout_ms: 15000 });
      const [ea, eb] = await Promise.all([aDone, bDone]);
      assert.equal(ea.type, 'response.completed', 'a never sees the refusal: its turn was sent again');
      assert.equal(eb.type, 'response.completed');
      assert.ok(!a.got.some((e) => e.type === 'error'));
      rec = (await wsStats(mock)).turn_list;
      assert.equal(rec.length, 7); // 4, the refused one, its resend, b's
      const after = rec.slice(5);
      for (const r of after) assert.ok(r.t_ms - refusedAt >= 1400, `a turn ${r.t_ms - refusedAt} ms after the refusal`);
      const resend = turnLines(p).filter((l) => l.attempts === 2);
      assert.equal(resend.length, 1);
      assert.equal(resend[0].status, 200);
      const st = await status(p);
      assert.equal(st.websockets.open, 2);
      assert.equal(st.websockets.turns_resent, 1);
      assert.equal(st.websockets.refusals_inside, 1);
      const m = await metrics(p);
      assert.match(m, /^pacerd_websockets_open 2$/m);
      assert.match(m, /^pacerd_websocket_turns_total\{provider="openai",model="gpt-mock",outcome="completed"\} 6$/m);
      a.close(1000);
      b.close(1000);
      await Promise.all([a.closed, b.closed]);
      await waitFor(async () => (await status(p)).websockets.open === 0, { timeout_ms: 5000 * SLOW, what: 'sockets closed' });
      assert.match(await metrics(p), /^pacerd_websockets_open 0$/m);
    },
  },
  {
    name: 'a refusal after the client sent more is relayed, not resent',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, {});
      const s = await rawUpgrade(p.port, '/v1/responses', 'sk-ws-raw-0002', { 'x-mock-ws-refuse': '1', 'x-mock-ws-refuse-ms': '300', 'x-mock-chunks': '1' });
      const got = messages(s);
      // Both turns in one write: the second is there before the first is refused.
      s.write(Buffer.concat([
        frame(0x1, JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'one' })),
        frame(0x1, JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'two' }))]));
      const ends = () => got.filter((e) => e.type === 'error' || e.type === 'response.completed');
      await waitFor(() => ends().length === 2, { timeout_ms: 5000 * SLOW, what: 'two ends' });
      assert.equal(ends()[0].type, 'error');
      assert.equal(ends()[0].error.code, 'rate_limit_exceeded');
      assert.equal(ends()[1].type, 'response.completed');
      assert.deepEqual(turnLines(p).map((x) => x.status), [429, 200]);
      assert.equal((await wsStats(mock)).turns, 2);
      s.destroy();
    },
  },
  {
    name: 'Realtime: ?model= names the lane, response.done corrects it, rate_limits.updated teaches it',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, {});
      const ws = await open(p, { path: '/v1/realtime?model=gpt-realtime-mock' });
      await waitFor(() => ws.got.some((e) => e.type === 'session.created'), { timeout_ms: 5000 * SLOW, what: 'session.created' });
      ws.send(JSON.stringify({ type: 'session.update', session: { model: 'gpt-realtime-mock' } }));
      const e = await turn(ws, { model: undefined, response: { instructions: 'say hi' } }, { end: 'response.done' });
      assert.equal(e.response.status, 'completed');
      assert.ok(ws.got.some((x) => x.type === 'rate_limits.updated'));
      const l = turnLines(p);
      assert.equal(l.length, 1);
      assert.equal(l[0].model, 'gpt-realtime-mock');
      assert.equal(l[0].tokens, e.response.usage.total_tokens);
      await waitFor(async () => {
        const lane = (await status(p)).lanes.find((x) => x.model === 'gpt-realtime-mock');
        return lane?.learned?.requests !== undefined;
      }, { timeout_ms: 5000 * SLOW, what: 'the requests budget learned from rate_limits.updated' });
      ws.close(1000);
      await ws.closed;
    },
  },
  {
    name: 'upgrade refusals: with ?model= the provider\'s 429 relayed as it is; without, pacerd\'s 101 then the provider\'s error inside (1013); a wrong version 426; inside no lane afterwards',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, {});
      await assert.rejects(open(p, { path: '/v1/responses?model=gpt-mock', headers: { 'x-mock-status': '429' } }), (e) => {
        assert.equal(e.status, 429);
        assert.equal(e.headers['retry-after'], '1');
        assert.match(e.body, /rate_limit_exceeded/);
        return true;
      });
      const r = await request(`${p.url}/v1/responses`, { headers: { upgrade: 'websocket', connection: 'Upgrade', 'sec-websocket-version': '8', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
      assert.equal(r.status, 426);
      assert.equal(r.headers['sec-websocket-version'], '13');
      // Without ?model= the client's socket is open before the provider's: the
      // refusal comes inside it, in the provider's shape, and the turn never went.
      const ws = await open(p, { headers: { 'x-mock-status': '429' } });
      ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'x' }));
      const c = await ws.closed;
      assert.equal(c.code, 1013);
      assert.equal(ws.got.length, 1);
      assert.equal(ws.got[0].type, 'error');
      assert.equal(ws.got[0].status, 429);
      assert.equal(ws.got[0].error.code, 'rate_limit_exceeded');
      assert.equal((await wsStats(mock)).turns, 0);
      await waitFor(async () => (await status(p)).websockets.open === 0, { timeout_ms: 5000 * SLOW, what: 'closed' });
      const st = await status(p);
      assert.equal(st.websockets.refused, 2);
      assert.ok(st.lanes.every((l) => l.in_flight === 0 && l.queue_depth === 0));
      // The lane of the first message's model was held by the 429 (its retry-after).
      const lane = st.lanes.find((l) => l.model === 'gpt-mock' && l.key === keyHash('sk-ws-test-0001'));
      assert.ok(lane !== undefined, JSON.stringify(st.lanes.map((l) => [l.key, l.model])));
    },
  },
  {
    name: 'hostile input: unmasked frame 1002, not UTF-8 1007, over max_body_bytes 1009, provider gone 1011; nothing leaks',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { limits: { max_body_bytes: 65536 } });
      await sleep(200);
      const fd0 = fds(p);
      let s = await rawUpgrade(p.port);
      let code = closeCode(s);
      s.write(frame(0x1, '{"type":"x"}', { mask: false }));
      assert.equal(await code, 1002);
      s.destroy();
      s = await rawUpgrade(p.port);
      code = closeCode(s);
      s.write(frame(0x1, Buffer.from([0xc3, 0x28])));
      assert.equal(await code, 1007);
      s.destroy();
      s = await rawUpgrade(p.port);
      code = closeCode(s);
      s.write(frame(0x1, 'x'.repeat(65537)));
      assert.equal(await code, 1009);
      s.destroy();
      // A close in the middle of a fragmented message, then the TCP close mid-frame.
      s = await rawUpgrade(p.port);
      code = closeCode(s);
      s.write(frame(0x1, '{"type":"respo', { fin: false }));
      s.write(frame(0x8, Buffer.from([0x03, 0xe8])));
      assert.equal(await code, 1000);
      s.destroy();
      s = await rawUpgrade(p.port);
      s.write(frame(0x1, '{"type":"response.create"}').subarray(0, 5));
      await sleep(100);
      s.destroy();
      // The provider drops the connection without a close frame.
      const ws = await open(p, { headers: { 'x-mock-ws-drop-turn': '1' } });
      ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'x' }));
      const c = await ws.closed;
      assert.equal(c.code, 1011);
      await waitFor(async () => {
        const st = await status(p);
        return st.websockets.open === 0 && st.websockets.opening === 0 && (await wsStats(mock)).open === 0;
      }, { timeout_ms: 5000 * SLOW, what: 'every socket closed' });
      await waitFor(() => fds(p) <= fd0, { timeout_ms: 5000 * SLOW, what: `fds back to ${fd0} (now ${fds(p)})` });
      const st = await status(p);
      assert.ok(st.lanes.every((l) => l.in_flight === 0 && l.queue_depth === 0), JSON.stringify(st.lanes));
      const codes = p.logs().filter((l) => l.event === 'websocket_closed').map((l) => l.code);
      assert.deepEqual(codes.sort(), [1000, 1001, 1002, 1007, 1009, 1011].sort());
    },
  },
  {
    name: 'backpressure: a client that stops reading while the mock sends 50 MiB: RSS grows <= 2 MiB, the mock is slowed',
    alone: true,
    timeout_ms: 60000,
    fn: async (t) => {
      const mock = await t.startMock();
      // Under AddressSanitizer (make test SAN=1) freed memory waits in a quarantine
      // and would count as growth: none here (inert without ASan).
      const asan = [process.env.ASAN_OPTIONS, 'quarantine_size_mb=0', 'thread_local_quarantine_size_kb=0'].filter(Boolean).join(':');
      const port = await freePort();
      const aport = await freePort();
      const cfg = t.baseConfig(port, { providers: { openai: { upstream: mock.url } }, admin: { listen: `127.0.0.1:${aport}` } });
      const p = await t.startPacerd({ port, config: toYaml(cfg), env: { ASAN_OPTIONS: asan } });
      p.admin = `http://127.0.0.1:${aport}`;
      const total = 50 * 1024 * 1024;
      const ws = await open(p, { headers: { 'x-mock-ws-flood-bytes': String(total) } });
      let received = 0;
      ws.removeAllListeners('message');
      ws.on('message', (d) => { received += d.length; });
      await sleep(300);
      const rss0 = p.rssKiB();
      ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'flood me' }));
      ws._socket.pause(); // reads nothing more
      await sleep(3000 * SLOW);
      const sentPaused = (await wsStats(mock)).flood_sent;
      const rssPaused = p.rssKiB();
      assert.ok(sentPaused < total / 4, `the mock sent ${sentPaused} bytes to a client that reads nothing`);
      assert.ok(rssPaused - rss0 <= 2048, `RSS grew ${rssPaused - rss0} KiB`);
      await sleep(1000);
      assert.ok((await wsStats(mock)).flood_sent - sentPaused < 1024 * 1024, 'the mock stays slowed');
      ws._socket.resume();
      await waitFor(async () => (await wsStats(mock)).flood_sent === total && received >= total,
        { timeout_ms: 30000 * SLOW, what: `all 50 MiB (${received} read)` });
      assert.ok(p.rssKiB() - rss0 <= 2048, `RSS grew ${p.rssKiB() - rss0} KiB by the end`);
      ws.close(1000);
      await ws.closed;
    },
  },
  {
    name: 'a client that never reads is cut after limits.client_timeout_s (1008 in the log; the provider gets 1001), and nothing is left open',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { limits: { client_timeout_s: 2 } });
      await sleep(200);
      const fd0 = fds(p);
      // A raw socket that sends one turn and then reads nothing: its kernel buffers
      // fill with the flood, then pacerd's output for it stops moving.
      const s = await rawUpgrade(p.port, '/v1/responses?model=gpt-mock', 'sk-ws-raw-0003', { 'x-mock-ws-flood-bytes': String(64 * 1024 * 1024) });
      s.pause();
      const t0 = Date.now();
      s.write(frame(0x1, JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'flood me' })));
      const line = await waitFor(() => p.logs().find((l) => l.event === 'websocket_closed'),
        { timeout_ms: 15000 * SLOW, what: 'the socket cut' });
      const took = Date.now() - t0;
      assert.equal(line.code, 1008);
      assert.equal(line.reason, 'the client stopped reading');
      assert.ok(took >= 1800 && took < 8000 * SLOW, `cut after ${took} ms`);
      await waitFor(async () => (await wsStats(mock)).open === 0, { timeout_ms: 5000 * SLOW, what: 'the provider\'s socket closed' });
      assert.equal((await wsStats(mock)).last_close_code, 1001, 'the provider is told the client went away');
      assert.ok((await wsStats(mock)).flood_sent < 32 * 1024 * 1024);
      const turnLine = turnLines(p)[0];
      assert.equal(turnLine.status, 499);
      assert.equal(turnLine.error, 'socket_closed');
      s.destroy();
      await waitFor(() => fds(p) <= fd0, { timeout_ms: 5000 * SLOW, what: `fds back to ${fd0} (now ${fds(p)})` });
      const st = await status(p);
      assert.equal(st.websockets.open, 0);
      assert.ok(st.lanes.every((l) => l.in_flight === 0));
    },
  },
  {
    name: 'backpressure from the client to the provider: a client sending 128 MiB to a provider that reads nothing for 4 s is held back (RSS <= 2 MiB more, most of its bytes wait in its own buffer), then every byte arrives',
    alone: true,
    timeout_ms: 60000,
    fn: async (t) => {
      const mock = await t.startMock();
      const asan = [process.env.ASAN_OPTIONS, 'quarantine_size_mb=0', 'thread_local_quarantine_size_kb=0'].filter(Boolean).join(':');
      const port = await freePort();
      const aport = await freePort();
      const cfg = t.baseConfig(port, { providers: { openai: { upstream: mock.url } }, admin: { listen: `127.0.0.1:${aport}` } });
      const p = await t.startPacerd({ port, config: toYaml(cfg), env: { ASAN_OPTIONS: asan } });
      p.admin = `http://127.0.0.1:${aport}`;
      const t0 = Date.now();
      const ws = await open(p, { path: '/v1/realtime?model=gpt-realtime-mock', headers: { 'x-mock-ws-pause-read-ms': String(4000 * SLOW) } });
      await sleep(300);
      const rss0 = p.rssKiB();
      // Realtime audio: 2,048 appends of 64 KiB, sent as fast as the socket takes
      // them. What the kernel buffers on the way (receive buffers grow up to
      // tcp_rmem's 32 MiB) is bounded; the rest must wait in the client.
      const chunk = JSON.stringify({ type: 'input_audio_buffer.append', audio: 'A'.repeat(65536 - 50) });
      const n = 2048;
      const total = n * chunk.length;
      for (let i = 0; i < n; i++) ws.send(chunk);
      await sleep(Math.max(0, t0 + 2500 * SLOW - Date.now()));
      const held = ws.bufferedAmount;
      assert.ok(held > total / 4, `only ${held} of ${total} bytes wait in the client`);
      assert.equal((await wsStats(mock)).bytes_in, 0, 'the mock reads nothing yet');
      assert.ok(p.rssKiB() - rss0 <= 2048, `RSS grew ${p.rssKiB() - rss0} KiB`);
      await waitFor(async () => (await wsStats(mock)).bytes_in === total && ws.bufferedAmount === 0,
        { timeout_ms: 30000 * SLOW, what: `all ${total} bytes at the mock (${(await wsStats(mock)).bytes_in})` });
      assert.ok(p.rssKiB() - rss0 <= 2048, `RSS grew ${p.rssKiB() - rss0} KiB by the end`);
      ws.close(1000);
      await ws.closed;
    },
  },
  {
    name: 'a turn the provider never ends: after timeouts.idle_s of silence it ends as 504 upstream_timeout (its slot back to the lane: another socket\'s turn goes), pacerd\'s error event, close 1011',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, {
        providers: { openai: { timeouts: { first_byte_s: 1, idle_s: 2 } } },
        plans: { default: { max_concurrent: 1 } },
      });
      const a = await open(p, { path: '/v1/responses?model=gpt-mock', headers: { 'x-mock-ws-hang-turn': '1' } });
      const b = await open(p, { path: '/v1/responses?model=gpt-mock' });
      const t0 = Date.now();
      a.send(JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'never ends' }));
      await waitFor(() => a.got.some((e) => e.type === 'response.created'), { timeout_ms: 5000 * SLOW, what: 'response.created' });
      const bDone = turn(b, {}, { timeout_ms: 15000 });
      const c = await a.closed;
      const aTook = Date.now() - t0;
      assert.equal(c.code, 1011);
      assert.match(c.reason, /timeouts\.idle_s/);
      const err = a.got.find((e) => e.type === 'error');
      assert.equal(err.error.code, 'upstream_timeout');
      assert.equal(err.error.type, 'pacer_error');
      assert.ok(aTook >= 1900 && aTook < 6000 * SLOW, `a's turn ended after ${aTook} ms`);
      // b's turn waited for the one slot, held by a's until its deadline.
      const eb = await bDone;
      assert.equal(eb.type, 'response.completed');
      const rec = (await wsStats(mock)).turn_list;
      assert.equal(rec.length, 2);
      assert.ok(rec[1].t_ms - rec[0].t_ms >= 1900, `b's turn reached the mock ${rec[1].t_ms - rec[0].t_ms} ms after a's`);
      const lines = turnLines(p);
      assert.deepEqual(lines.map((l) => [l.status, l.error ?? null]), [[504, 'upstream_timeout'], [200, null]]);
      assert.equal((await wsStats(mock)).last_close_code, 1001);
      b.close(1000);
      await b.closed;
      await waitFor(async () => (await status(p)).lanes.every((l) => l.in_flight === 0), { timeout_ms: 5000 * SLOW, what: 'no turn in flight' });
    },
  },
];
