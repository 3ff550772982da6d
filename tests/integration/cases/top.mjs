// SPDX-License-Identifier: Apache-2.0
// `pacerd top` (issue 9): a live view of a running pacerd's admin /status. Without a
// terminal it prints one summary line per poll; under tmux (a real terminal: raw mode,
// the alternate screen, keys) it shows the header and a row per lane, refreshed every
// second, `s` cycles the sort and `q` quits with the terminal restored.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { PACERD_BIN, SLOW, freePort, keyHash, sleep, tryConnect, waitFor } from '../lib.mjs';
import { chatBody, keyEntry, runLoad, startPacerdFor, summarize } from '../load.mjs';

const TOKEN = 'top-admin-token';

/** pacerd with an admin listener (bearer token TOKEN) and two paced plans. */
async function pacerdWithAdmin(t, keys) {
  const mock = await t.startMock();
  const aport = await freePort();
  const p = await startPacerdFor(t, mock, {
    admin: { listen: `127.0.0.1:${aport}`, token: TOKEN },
    plans: { fast: { max_requests_per_second: 20 }, slow: { max_requests_per_second: 5 } },
    keys: keys.map(([key, plan]) => keyEntry(key, plan)),
  });
  await waitFor(async () => (await tryConnect(aport)) === 'open', { timeout_ms: 10000 * SLOW, what: 'the admin port' });
  return { p, admin: `127.0.0.1:${aport}` };
}

/** A load through pacerd on `key`, for `ms` at most (not awaited by the caller at once). */
function load(p, key, n, concurrency, ms) {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  return runLoad({ base: p.url, n, concurrency, deadline_ms: ms, makeRequest: () => ({ path: '/v1/chat/completions', headers, body: chatBody() }) });
}

/** tmux on a private socket (its own server, killed at the end of the test). */
function tmux(sock, ...args) {
  return execFileSync('tmux', ['-L', sock, ...args], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'pipe'] });
}

export const tests = [
  {
    name: 'not a terminal: --count 3 prints 3 summary lines with numbers under load, exit 0; a wrong token: a clear error, exit 1',
    timeout_ms: 30000,
    fn: async (t) => {
      const key = 'sk-top-lines-0001';
      const { p, admin } = await pacerdWithAdmin(t, [[key, 'fast']]);
      const run = load(p, key, 400, 4, 8000);
      await sleep(300);
      const r = await t.runPacerd(['top', '--admin', admin, '--count', '3'], { env: { PACERD_ADMIN_TOKEN: TOKEN }, timeout_ms: 15000 });
      console.log(`#   top: ${JSON.stringify(r.stdout)}`);
      assert.equal(r.code, 0, r.stderr);
      const lines = r.stdout.trimEnd().split('\n');
      assert.equal(lines.length, 3, r.stdout);
      for (const l of lines) {
        assert.match(l, /^\d\d:\d\d:\d\d in_flight \d+ req\/s (-|\d+\.\d) lanes 1 busiest openai\/[0-9a-f]{12} \d+\.\d\/s queue \d+ in_flight \d+ \w+$/, l);
        assert.doesNotMatch(l, /\x1b/, 'no escape sequences');
      }
      // From the second poll on, the rate is measured: about 20/s under this load.
      const rps = Number(lines[2].match(/req\/s (\S+)/)[1]);
      assert.ok(rps > 5 && rps < 40, `req/s ${rps}`);
      assert.ok(lines[2].includes(`busiest openai/${keyHash(key)}`), lines[2]);

      const bad = await t.runPacerd(['top', '--admin', admin, '--count', '3'], { env: { PACERD_ADMIN_TOKEN: 'wrong' }, timeout_ms: 15000 });
      console.log(`#   wrong token: ${bad.code}: ${bad.stderr.trim()}`);
      assert.equal(bad.code, 1);
      assert.equal(bad.stdout, '');
      assert.match(bad.stderr, /^pacerd top: http:\/\/127\.0\.0\.1:\d+\/status: 401: the admin listener refused the token/);
      const none = await t.runPacerd(['top', '--admin', admin, '--count', '1'], { env: { PACERD_ADMIN_TOKEN: '' }, timeout_ms: 15000 });
      assert.equal(none.code, 1);
      assert.match(none.stderr, /refused the token \(none was sent\)/);
      const gone = await t.runPacerd(['top', '--admin', '127.0.0.1:1', '--count', '1'], { timeout_ms: 15000 });
      assert.equal(gone.code, 1);
      assert.match(gone.stdout, /error: http:\/\/127\.0\.0\.1:1\/status: Couldn't connect/);
      const usage = await t.runPacerd(['top', '--interval', '0']);
      assert.equal(usage.code, 2);
      assert.match(usage.stderr, /--interval/);
      const sum = summarize(await run);
      assert.ok(sum.ok > 0, JSON.stringify(sum.statuses));
    },
  },
  {
    name: 'under tmux: header and a row per lane, numbers change between captures, s changes the order, q quits and restores the screen',
    timeout_ms: 45000,
    fn: async (t) => {
      const v = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
      assert.ok(!v.error && v.status === 0, `tmux is required for this test (scripts/install-deps.sh installs it): ${v.error?.message ?? v.stderr}`);
      // The fast lane's hash sorts after the slow one's: by activity the fast lane is
      // first, by key the slow one, so `s` visibly reorders.
      let fast = 'sk-top-screen-fast-0';
      for (let i = 1; keyHash(fast) < keyHash('sk-top-screen-slow'); i++) fast = `sk-top-screen-fast-${i}`;
      const slow = 'sk-top-screen-slow';
      const { p, admin } = await pacerdWithAdmin(t, [[fast, 'fast'], [slow, 'slow']]);
      const runs = [load(p, fast, 400, 4, 14000), load(p, slow, 100, 2, 14000)];

      const sock = `pacerd-test-${process.pid}`;
      t.defer(() => { try { tmux(sock, 'kill-server'); } catch { /* already gone */ } });
      // The terminal's modes before and after, and the exit status, printed in the pane
      // once top has left its alternate screen.
      const modes = 'stty -a | tr " ;" "\\n\\n" | grep -E "^-?(icanon|echo|isig)$" | tr "\\n" " "';
      tmux(sock, '-f', '/dev/null', 'new-session', '-d', '-s', 'top', '-x', '160', '-y', '40',
        `echo "before: $(${modes})"; PACERD_ADMIN_TOKEN=${TOKEN} ${PACERD_BIN} top --admin ${admin}; echo "top-exit=$? after: $(${modes})"; sleep 30`);
      const capture = () => tmux(sock, 'capture-pane', '-p', '-t', 'top');
      const rowOrder = (screen) => screen.split('\n').filter((l) => l.startsWith('openai ')).map((l) => l.split(/\s+/)[1]);

      // Two polls: the header has a rate and both lanes have rows.
      let first = '';
      await waitFor(() => {
        first = capture();
        return /req\/s \d/.test(first) && first.includes(keyHash(fast)) && first.includes(keyHash(slow));
      }, { timeout_ms: 8000 * SLOW, what: `the screen with both lanes; last:\n${first}` });
      for (const l of first.split('\n')) if (l.trim()) console.log(`#   | ${l}`);
      assert.match(first, /^pacerd 127\.0\.0\.1:\d+ {2}up \d+s {2}in flight \d+ {2}req\/s \d+\.\d {2}lanes 2 {2}sort: activity/m);
      assert.match(first, /^responses 2xx \d+ {2}4xx \d+ {2}5xx \d+ {2}429s absorbed \d+/m);
      assert.match(first, /PROVIDER +KEY +MODEL +PLAN +QUEUE +ETA +INFLIGHT +REQ\/S \(LIMIT\) +REMAINING +RESET +429\/M +STATE/);
      assert.match(first, new RegExp(`^openai +${keyHash(fast)} +\\S+ +fast +\\d+ +\\S+ +\\d+/\\d+ +\\d+\\.\\d/20\\.0 .* (open|adaptive|held|probing)`, 'm'));
      assert.deepEqual(rowOrder(first), [keyHash(fast), keyHash(slow)], 'by activity: the fast lane first');

      await sleep(2200);
      const second = capture();
      const served = (s) => Number(s.match(/responses 2xx (\d+)/)[1]);
      assert.ok(served(second) > served(first), `2xx ${served(first)} -> ${served(second)}`);
      assert.notEqual(second, first);

      // s: activity -> queue -> key: the slow lane (smaller hash) first.
      tmux(sock, 'send-keys', '-t', 'top', 's');
      await waitFor(() => capture().includes('sort: queue'), { timeout_ms: 3000 * SLOW, what: 'sort: queue' });
      tmux(sock, 'send-keys', '-t', 'top', 's');
      let byKey = '';
      await waitFor(() => (byKey = capture()).includes('sort: key'), { timeout_ms: 3000 * SLOW, what: 'sort: key' });
      assert.deepEqual(rowOrder(byKey), [keyHash(slow), keyHash(fast)], `by key:\n${byKey}`);
      // Arrow keys scroll (two rows on 40 lines: nothing to scroll, nothing breaks).
      // q: the process ends with 0 and the alternate screen is gone. Sent together, as
      // keys typed while a poll is under way arrive: one read, the q last in it.
      tmux(sock, 'send-keys', '-t', 'top', 'Down', 'Up', 'q');
      let after = '';
      await waitFor(() => /top-exit=/.test(after = capture()), { timeout_ms: 3000 * SLOW, what: `top to exit; last:\n${after}` });
      console.log(`#   after q: ${after.trim().split('\n').join(' | ')}`);
      assert.match(after, /top-exit=0 /);
      const before = after.match(/before: (.*)/)[1].trim();
      for (const mode of ['icanon', 'echo', 'isig']) assert.match(before, new RegExp(`(^| )${mode}( |$)`), before);
      assert.equal(after.match(/after: (.*)/)[1].trim(), before, 'the terminal modes restored');
      assert.doesNotMatch(after, /PROVIDER/, 'the alternate screen was left');
      tmux(sock, 'kill-server');

      const sums = (await Promise.all(runs)).map(summarize);
      assert.ok(sums[0].ok > 0 && sums[1].ok > 0, JSON.stringify(sums.map((s) => s.statuses)));
    },
  },
  {
    name: 'under tmux: SIGTERM (and SIGINT) leave the screen and restore the terminal, exit 0',
    timeout_ms: 30000,
    fn: async (t) => {
      const v = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
      assert.ok(!v.error && v.status === 0, `tmux is required for this test (scripts/install-deps.sh installs it): ${v.error?.message ?? v.stderr}`);
      const { admin } = await pacerdWithAdmin(t, []);
      const sock = `pacerd-test-${process.pid}-sig`;
      t.defer(() => { try { tmux(sock, 'kill-server'); } catch { /* already gone */ } });
      const modes = 'stty -a | tr " ;" "\\n\\n" | grep -E "^-?(icanon|echo|isig)$" | tr "\\n" " "';
      for (const [i, sig] of ['SIGTERM', 'SIGINT'].entries()) {
        const pidFile = `${t.dir}/top-${i}.pid`;
        tmux(sock, '-f', '/dev/null', 'new-session', '-d', '-s', `sig${i}`, '-x', '120', '-y', '30',
          `echo "before: $(${modes})"; sh -c 'echo $$ > ${pidFile}; PACERD_ADMIN_TOKEN=${TOKEN} exec ${PACERD_BIN} top --admin ${admin}'; echo "top-exit=$? after: $(${modes})"; sleep 30`);
        const capture = () => tmux(sock, 'capture-pane', '-p', '-t', `sig${i}`);
        await waitFor(() => capture().includes('PROVIDER'), { timeout_ms: 5000 * SLOW, what: 'the screen' });
        const pid = Number(fs.readFileSync(pidFile, 'utf8'));
        process.kill(pid, sig);
        let after = '';
        await waitFor(() => /top-exit=/.test(after = capture()), { timeout_ms: 3000 * SLOW, what: `top to exit on ${sig}; last:\n${after}` });
        assert.match(after, /top-exit=0 /, after);
        assert.equal(after.match(/after: (.*)/)[1].trim(), after.match(/before: (.*)/)[1].trim(), `${sig}: the terminal modes restored`);
        assert.doesNotMatch(after, /PROVIDER/, `${sig}: the alternate screen was left`);
      }
      tmux(sock, 'kill-server');
    },
  },
];
