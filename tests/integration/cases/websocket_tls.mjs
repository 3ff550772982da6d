// SPDX-License-Identifier: Apache-2.0
// WebSockets over TLS (issue 31): inside a terminated CONNECT tunnel (a client with
// HTTPS_PROXY=pacerd and wss://api.openai.com/v1/responses: the socket runs over the
// tunnel's own TLS session, handed from the HTTP layer to the relay), and to a
// provider whose upstream is https (a `ws` server over node:https with the suite's
// test certificates). Turns are paced and metered as on the base URL.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import { WebSocketServer } from 'ws';
import { SLOW, keyHash, sleep, waitFor } from '../lib.mjs';
import { asanNoQuarantine, startPacerdWithAdmin } from '../load.mjs';
import { fds, open, status, tunnelTls, turn, turnLines, wsStats } from '../lib/ws.mjs';

const gapsOf = (ts) => ts.slice(1).map((x, i) => x - ts[i]);

/** A Responses-shaped WebSocket server over TLS: every response.create gets
 * response.created and response.completed with usage; `turns` records arrivals. */
async function tlsUpstream(t) {
  const server = https.createServer({ cert: fs.readFileSync(t.certs.cert), key: fs.readFileSync(t.certs.key) });
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  const up = { turns: [], sockets: 0, auth: [] };
  wss.on('connection', (ws, req) => {
    up.sockets++;
    up.auth.push(req.headers.authorization);
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString());
      if (m.type !== 'response.create') return;
      up.turns.push({ t_ms: Date.now(), model: m.model, bytes: data.length });
      ws.send(JSON.stringify({ type: 'response.created', response: { status: 'in_progress', model: m.model } }));
      ws.send(JSON.stringify({ type: 'response.output_text.delta', delta: 'x'.repeat(m.pad ?? 8) }));
      ws.send(JSON.stringify({ type: 'response.completed', response: { status: 'completed', model: m.model, usage: { input_tokens: 7, output_tokens: 5, total_tokens: 12 } } }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.defer(() => new Promise((r) => { for (const c of wss.clients) c.terminate(); wss.close(); server.close(() => r()); }));
  up.port = server.address().port;
  return up;
}

export const tests = [
  {
    name: 'inside a CONNECT tunnel (wss://api.openai.com through HTTPS_PROXY=pacerd): the socket runs over the tunnel\'s TLS; turns paced at 5/s and metered as on the base URL; megabytes both ways; nothing leaks',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { plans: { default: { max_requests_per_second: 5 } } });
      await sleep(200);
      const fd0 = fds(p);
      const key = 'sk-ws-tunnel-0001';
      const s = await tunnelTls(p);
      // Large events down (40 KiB deltas: several TLS records each) and a large turn up.
      const ws = await open(p, { tunnel: s, key, headers: { 'x-mock-chunks': '25', 'x-mock-chunk-bytes': '40000' } });
      const ends = [];
      for (let i = 0; i < 6; i++) ends.push(await turn(ws, { input: i === 5 ? 'y'.repeat(300000) : `turn ${i}` }));
      assert.deepEqual(ends.map((e) => e.type), Array(6).fill('response.completed'));
      const deltas = ws.got.filter((e) => e.type === 'response.output_text.delta');
      assert.equal(deltas.length, 6 * 25);
      assert.ok(deltas.every((d) => d.delta.length === 40000), 'every delta whole');
      const rec = (await wsStats(mock)).turn_list;
      assert.equal(rec.length, 6);
      const gaps = gapsOf(rec.map((r) => r.t_ms));
      assert.ok(Math.min(...gaps) >= 190, `gaps ${gaps.join(',')}`);
      const lines = turnLines(p);
      assert.equal(lines.length, 6);
      lines.forEach((l, i) => {
        assert.equal(l.status, 200);
        assert.equal(l.tunnel, true);
        assert.equal(l.key, keyHash(key));
        assert.equal(l.model, 'gpt-mock');
        assert.equal(l.tokens, ends[i].response.usage.total_tokens);
      });
      const opened = p.logs().find((l) => l.event === 'websocket_open');
      assert.equal(opened.tunnel, true);
      const st = await status(p);
      assert.equal(st.websockets.open, 1);
      const lane = st.lanes.find((l) => l.model === 'gpt-mock' && l.key === keyHash(key));
      assert.equal(lane.counters.dispatched, 7); // the opening and 6 turns
      assert.ok(st.tunnels.handshakes >= 1);
      ws.close(1000, 'done');
      const c = await ws.closed;
      assert.equal(c.code, 1000);
      await waitFor(async () => (await status(p)).websockets.open === 0 && (await wsStats(mock)).open === 0,
        { timeout_ms: 5000 * SLOW, what: 'both sockets closed' });
      const closed = p.logs().find((l) => l.event === 'websocket_closed');
      assert.equal(closed.code, 1000);
      assert.equal(closed.tunnel, true);
      assert.equal((await wsStats(mock)).last_close_code, 1000);
      await waitFor(() => fds(p) <= fd0, { timeout_ms: 5000 * SLOW, what: `fds back to ${fd0} (now ${fds(p)})` });
    },
  },
  {
    name: 'inside a CONNECT tunnel: a client that stops reading while the mock floods 20 MiB holds the mock back (RSS <= 3 MiB more), then gets every byte',
    timeout_ms: 60000,
    alone: true,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, {}, { env: asanNoQuarantine() }); // RSS read below
      const total = 20 * 1024 * 1024;
      const s = await tunnelTls(p);
      const ws = await open(p, { tunnel: s, headers: { 'x-mock-ws-flood-bytes': String(total) } });
      let received = 0;
      ws.removeAllListeners('message');
      ws.on('message', (d) => { received += d.length; });
      await sleep(300);
      const rss0 = p.rssKiB();
      ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'flood me' }));
      // Nothing more is read from the TLS socket: ws resumes its socket when its
      // receiver drains, so resume() does nothing until the end of the pause.
      const resume = s.resume;
      s.resume = () => s;
      s.pause();
      await sleep(2500 * SLOW);
      const sentPaused = (await wsStats(mock)).flood_sent;
      assert.ok(sentPaused < total / 2, `the mock sent ${sentPaused} bytes to a client that reads nothing (${received} read, rss +${p.rssKiB() - rss0})`);
      assert.ok(p.rssKiB() - rss0 <= 3072, `RSS grew ${p.rssKiB() - rss0} KiB`);
      await sleep(1000);
      assert.ok((await wsStats(mock)).flood_sent - sentPaused < 1024 * 1024, 'the mock stays slowed');
      s.resume = resume;
      s.resume();
      await waitFor(async () => (await wsStats(mock)).flood_sent === total && received >= total,
        { timeout_ms: 30000 * SLOW, what: `all 20 MiB (${received} read)` });
      ws.close(1000);
      await ws.closed;
    },
  },
  {
    name: 'TLS upstream (https provider, tls.ca_file): the provider\'s socket over TLS, turns paced at 5/s and metered; the key reaches it',
    timeout_ms: 30000,
    fn: async (t) => {
      const up = await tlsUpstream(t);
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, {
        providers: { openai: { upstream: `https://localhost:${up.port}`, tls: { ca_file: t.certs.ca } } },
        plans: { default: { max_requests_per_second: 5 } },
      });
      const key = 'sk-ws-tls-up-0001';
      const ws = await open(p, { key });
      const ends = [];
      for (let i = 0; i < 6; i++) ends.push(await turn(ws, { model: 'gpt-tls', pad: i === 0 ? 200000 : 8 }));
      assert.deepEqual(ends.map((e) => e.type), Array(6).fill('response.completed'));
      assert.equal(ws.got.filter((e) => e.type === 'response.output_text.delta')[0].delta.length, 200000);
      assert.equal(up.sockets, 1);
      assert.deepEqual(up.auth, [`Bearer ${key}`]);
      assert.equal(up.turns.length, 6);
      const gaps = gapsOf(up.turns.map((x) => x.t_ms));
      assert.ok(Math.min(...gaps) >= 185, `gaps ${gaps.join(',')}`);
      const lines = turnLines(p);
      assert.deepEqual(lines.map((l) => [l.status, l.model, l.tokens]), Array(6).fill([200, 'gpt-tls', 12]));
      ws.close(1000);
      assert.equal((await ws.closed).code, 1000);
      await waitFor(async () => (await status(p)).websockets.open === 0, { timeout_ms: 5000 * SLOW, what: 'closed' });
    },
  },
  {
    name: 'TLS upstream whose certificate is not trusted (no tls.ca_file): the opening fails, the client gets 1011, and nothing is left open',
    fn: async (t) => {
      const up = await tlsUpstream(t);
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { providers: { openai: { upstream: `https://localhost:${up.port}`, tls: null } } });
      const ws = await open(p, {});
      ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-tls', input: 'x' }));
      const c = await ws.closed;
      assert.equal(c.code, 1011);
      assert.equal(up.sockets, 0);
      assert.equal(up.turns.length, 0);
      await waitFor(async () => { const st = await status(p); return st.websockets.open === 0 && st.websockets.opening === 0; },
        { timeout_ms: 5000 * SLOW, what: 'closed' });
      assert.ok((await status(p)).lanes.every((l) => l.in_flight === 0));
    },
  },
];
