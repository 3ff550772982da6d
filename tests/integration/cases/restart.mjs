// SPDX-License-Identifier: Apache-2.0
// What a lane learned survives a restart (issue 30 item 1): the state directory's
// lanes.state, written at shutdown and every 30 s, read back at start and aged by the
// time that passed. A provider that sends no rate-limit headers (429s with retry-after
// only; 600 RPM enforced as a bucket of 10), 20 agents, no plan: pacerd learns under
// load, is restarted mid-run (SIGTERM, started again with the same STATE_DIRECTORY)
// while the load goes on, and the 2 s after the restart must not be a cold start's
// (11-14 upstream 429s on main before this change). A state file that is truncated,
// corrupt, of another version or not pacerd's at all is ignored with one log line.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SLOW, freePort, keyHash, request, sha256, sleep, tryConnect, waitFor } from '../lib.mjs';
import { chatBody, events, send, toYaml } from '../load.mjs';

// It counts refusals at an exact bucket in a 2-second window: nothing beside it.
export const alone = true;
// The others, beside other files, each in a process of its own (d. waits 30 s for the
// periodic write).
export const split = true;

const KEY = 'sk-restart-secret-0001';
const MOCK = { style: 'openai', rpm: 600, burst: 10, headers: false, latency_ms: 50 };

/** pacerd's configuration: the suite's base, an admin port, no plan (zero configuration). */
function pacerdConfig(t, port, aport, mock) {
  return toYaml(t.baseConfig(port, {
    admin: { listen: `127.0.0.1:${aport}` },
    log: { level: 'info' },
    providers: { openai: { upstream: mock.url } },
  }));
}

/** Starts pacerd with `dir` as its state directory; resolves once the admin port answers. */
async function start(t, { port, aport, mock, dir }) {
  const p = await t.startPacerd({ port, config: pacerdConfig(t, port, aport, mock), env: { STATE_DIRECTORY: dir } });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  p.admin = `http://127.0.0.1:${aport}`;
  return p;
}

async function lanes(p) {
  const r = await request(`${p.admin}/status`);
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body).lanes;
}

/**
 * `agents` clients with one key, each sending its next request when the last is
 * answered, until stop() is called. A client whose connection is refused (pacerd
 * restarting) tries again 20 ms later. Resolves with every result once stopped.
 */
function agentsLoad(base, { agents }) {
  let running = true;
  const results = [];
  const t0 = Date.now();
  const one = async (a) => {
    while (running) {
      const r = await send(`${base}/v1/chat/completions`, {
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-agent-id': `agent-${a}` },
        body: chatBody({ max_tokens: 8 }), timeout_ms: 20000, t0,
      });
      results.push(r);
      if (r.status === 0) await sleep(20);
    }
  };
  const done = Promise.all(Array.from({ length: agents }, (_, a) => one(a)));
  return { stop: async () => { running = false; await done; return results; } };
}

export const tests = [
  {
    name: 'a. no headers, 600 RPM as a bucket of 10, 20 agents: <= 1 upstream 429 in the 2 s after a restart; the lane shows restored',
    timeout_ms: 60000,
    fn: async (t) => {
      const mock = await t.startMock({ config: MOCK });
      const dir = fs.mkdtempSync(path.join(t.dir, 'state-'));
      const port = await freePort();
      const aport = await freePort();
      const p1 = await start(t, { port, aport, mock, dir });
      const load = agentsLoad(`http://127.0.0.1:${port}`, { agents: 20 });
      await sleep(10000); // learn under load
      const before = (await lanes(p1)).find((l) => l.key !== undefined);
      const atStop = await mock.stats();
      await p1.stop({ timeout_ms: 15000 });
      const p2 = await start(t, { port, aport, mock, dir });
      const s0 = await mock.stats();
      await sleep(2000);
      const s2 = await mock.stats();
      const after = await lanes(p2);
      await sleep(2000);
      const results = await load.stop();
      const s4 = await mock.stats();
      const r429 = (s) => s.responses['429'] ?? 0;
      const refused2s = r429(s2) - r429(s0);
      const file = path.join(dir, 'lanes.state');
      const restored = events(p2, 'state_restored');
      const ok = results.filter((r) => r.status === 200).length;
      const line = `# restart: upstream 429s in the 2 s after the restart: ${refused2s} (requests ${s2.requests - s0.requests}); ` +
        `before it: ${r429(atStop)} 429s in ${atStop.requests} requests over ~10 s; then 2 s more: ${r429(s4) - r429(s2)} 429s in ${s4.requests - s2.requests}; ` +
        `clients: ${ok} ok of ${results.length}; lane before: limit ${before?.concurrency_limit} delay ${before?.dispatch_delay_ms} ms; ` +
        `after: ${JSON.stringify(after.map((l) => ({ state: l.state, limit: l.concurrency_limit, delay: l.dispatch_delay_ms, restored: l.restored, restored_age_ms: l.restored_age_ms })))}; ` +
        `state_restored: ${JSON.stringify(restored)}`;
      console.log(line);
      t.note(`upstream 429s in the 2 s after the restart: ${refused2s}`);
      assert.ok(fs.existsSync(file), `no ${file}`);
      const bytes = fs.readFileSync(file);
      assert.ok(!bytes.includes(KEY), 'the state file holds the API key');
      assert.ok(!bytes.includes(sha256(KEY)), 'the state file holds the whole SHA-256 of the API key');
      assert.equal(restored.length, 1, `one state_restored line: ${JSON.stringify(restored)}`);
      assert.ok(refused2s <= 1, `${refused2s} upstream 429s in the 2 s after the restart (> 1)\n${line}`);
    },
  },
  {
    name: 'b. a restored lane shows as restored (with its age) in /status and pacerd top until its first answer',
    timeout_ms: 30000,
    alone: false,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600, burst: 10, headers: false } });
      const dir = fs.mkdtempSync(path.join(t.dir, 'state-'));
      const port = await freePort();
      const aport = await freePort();
      const p1 = await start(t, { port, aport, mock, dir });
      const one = (delay_ms = 0) => send(`${p1.url}/v1/chat/completions`, {
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-mock-delay-ms': String(delay_ms) },
        body: chatBody({ max_tokens: 8 }), timeout_ms: 10000,
      });
      for (let i = 0; i < 3; i++) assert.equal((await one()).status, 200);
      await p1.stop();
      const p2 = await start(t, { port, aport, mock, dir });
      assert.deepEqual(await lanes(p2), [], 'a saved lane waits for its first request');
      const slow = one(1500); // the lane is made now; its answer takes 1.5 s
      const shown = await waitFor(async () => (await lanes(p2)).find((l) => l.restored), { timeout_ms: 1000, what: 'a restored lane in /status' });
      assert.equal(shown.key, keyHash(KEY));
      assert.ok(shown.restored_age_ms >= 0 && shown.restored_age_ms < 10000, JSON.stringify(shown));
      const top = await t.runPacerd(['top', '--admin', `127.0.0.1:${aport}`, '--count', '1']);
      assert.match(top.stdout, / open \(restored\)/, top.stdout);
      assert.equal((await slow).status, 200);
      const after = (await lanes(p2))[0];
      assert.equal(after.restored, false, JSON.stringify(after));
      assert.equal(after.restored_age_ms, undefined);
    },
  },
  {
    name: 'c. a state file cut short, changed, of another version or not pacerd\'s: pacerd starts clean, says why in one line, and replaces it',
    timeout_ms: 60000,
    alone: false,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600, burst: 10, headers: false } });
      const good = fs.mkdtempSync(path.join(t.dir, 'state-'));
      const port = await freePort();
      const aport = await freePort();
      const p0 = await start(t, { port, aport, mock, dir: good });
      const r = await send(`${p0.url}/v1/chat/completions`, {
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: chatBody({ max_tokens: 8 }),
      });
      assert.equal(r.status, 200);
      await p0.stop();
      const bytes = fs.readFileSync(path.join(good, 'lanes.state'));
      assert.ok(bytes.toString().startsWith('pacerd-state 1 sha256='), bytes.toString().slice(0, 80));
      const flipped = Buffer.from(bytes);
      flipped[bytes.length - 20] ^= 0x01;
      const variants = [
        ['truncated', bytes.subarray(0, Math.floor(bytes.length / 2)), 'corrupt'],
        ['a byte changed', flipped, 'corrupt'],
        ['version 2', Buffer.from(bytes.toString().replace(/^pacerd-state 1 /, 'pacerd-state 2 ')), 'version'],
        ['foreign', Buffer.from('{"lanes": []}\n'), 'foreign'],
      ];
      for (const [what, content, reason] of variants) {
        const dir = fs.mkdtempSync(path.join(t.dir, 'state-'));
        fs.writeFileSync(path.join(dir, 'lanes.state'), content);
        const p = await start(t, { port, aport, mock, dir });
        const ignored = events(p, 'state_ignored');
        assert.equal(ignored.length, 1, `${what}: ${JSON.stringify(p.logs().filter((l) => String(l.event).startsWith('state')))}`);
        assert.equal(ignored[0].reason, reason, `${what}: ${JSON.stringify(ignored[0])}`);
        assert.equal(events(p, 'state_restored').length, 0, what);
        const q = await send(`${p.url}/v1/chat/completions`, {
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'x-mock-delay-ms': '800' }, body: chatBody({ max_tokens: 8 }),
        });
        assert.equal(q.status, 200, what);
        await p.stop();
        const now = fs.readFileSync(path.join(dir, 'lanes.state')).toString();
        assert.ok(now.startsWith('pacerd-state 1 sha256='), `${what}: not replaced at shutdown: ${now.slice(0, 60)}`);
        t.note(`${what}: ${ignored[0].message}`);
      }
    },
  },
  {
    // The periodic write is what an OOM kill or a power cut leaves: no shutdown
    // writes anything then. Every 30 s (persist.h's PERSIST_INTERVAL_S).
    name: 'd. written every 30 s: a pacerd killed with SIGKILL leaves what it learned for the next',
    timeout_ms: 60000,
    alone: false,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 600, burst: 10, headers: false } });
      const dir = fs.mkdtempSync(path.join(t.dir, 'state-'));
      const file = path.join(dir, 'lanes.state');
      const port = await freePort();
      const aport = await freePort();
      const p1 = await start(t, { port, aport, mock, dir });
      for (let i = 0; i < 3; i++) {
        const r = await send(`${p1.url}/v1/chat/completions`, {
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: chatBody({ max_tokens: 8 }),
        });
        assert.equal(r.status, 200);
      }
      assert.ok(!fs.existsSync(file), 'nothing is written before the first 30 s are up');
      await waitFor(() => fs.existsSync(file), { timeout_ms: 35000 * SLOW, interval_ms: 200, what: 'the periodic write' });
      p1.signal('SIGKILL');
      await p1.stop({ expectCode: null });
      const p2 = await start(t, { port, aport, mock, dir });
      const restored = events(p2, 'state_restored');
      assert.equal(restored.length, 1, JSON.stringify(p2.logs().filter((l) => String(l.event).startsWith('state'))));
      assert.equal(restored[0].lanes, 1, JSON.stringify(restored[0]));
      assert.ok(!fs.readFileSync(file).includes(KEY), 'the state file holds the API key');
    },
  },
];
