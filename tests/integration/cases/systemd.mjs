// SPDX-License-Identifier: Apache-2.0
// systemd integration: the sd_notify datagrams (READY, RELOADING, STOPPING,
// WATCHDOG) on $NOTIFY_SOCKET, and the unit file checked by systemd-analyze.
// A small python3 script stands in for systemd's end of the socket (Node's
// dgram module has no AF_UNIX).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PACERD_BIN, ROOT, SLOW, sleep, waitFor } from '../lib.mjs';
import { startPacerdFor } from '../load.mjs';

const SINK = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("ready", flush=True)
while True:
    data = s.recv(4096)
    print(data.decode().replace("\\n", "|"), flush=True)
`;

function startSink(sockPath) {
  const child = spawn('python3', ['-c', SINK, sockPath], { stdio: ['ignore', 'pipe', 'inherit'] });
  const sink = { child, lines: [] };
  let buf = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      sink.lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  return sink;
}

export const tests = [
  {
    name: 'sd_notify: READY=1 once listening, WATCHDOG=1 at half WATCHDOG_USEC, RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM',
    timeout_ms: 20000 * SLOW,
    fn: async (t) => {
      const sockPath = path.join(t.dir, 'notify.sock');
      const sink = startSink(sockPath);
      try {
        await waitFor(() => sink.lines.includes('ready'), { timeout_ms: 5000, what: 'the notify sink' });
        const mock = await t.startMock();
        const p = await t.startPacerd({
          config: { providers: { openai: { upstream: mock.url } } },
          env: { NOTIFY_SOCKET: sockPath, WATCHDOG_USEC: String(400000 * SLOW) },
        });
        await waitFor(() => sink.lines.some((l) => l.startsWith('READY=1')), { timeout_ms: 5000 * SLOW, what: 'READY=1' });
        const n0 = sink.lines.filter((l) => l === 'WATCHDOG=1').length;
        await sleep(1100 * SLOW);
        const pings = sink.lines.filter((l) => l === 'WATCHDOG=1').length - n0;
        assert.ok(pings >= 3 && pings <= 8, `${pings} WATCHDOG=1 in 1.1 s with WATCHDOG_USEC=400000 (every 200 ms expected)`);

        p.proc.signal('SIGHUP');
        await waitFor(() => sink.lines.some((l) => /^RELOADING=1\|MONOTONIC_USEC=\d+$/.test(l)), { timeout_ms: 3000 * SLOW, what: 'RELOADING=1' });
        const iReload = sink.lines.findIndex((l) => l.startsWith('RELOADING=1'));
        await waitFor(() => sink.lines.slice(iReload).some((l) => l.startsWith('READY=1')), { timeout_ms: 3000 * SLOW, what: 'READY=1 after the reload' });

        const r = await p.stop();
        assert.equal(r.code, 0);
        assert.ok(sink.lines.some((l) => l.startsWith('STOPPING=1')), `no STOPPING=1 in ${JSON.stringify(sink.lines)}`);
      } finally {
        sink.child.kill('SIGTERM');
      }
    },
  },
  {
    name: 'systemd/pacerd.service passes systemd-analyze verify, and is Type=notify and hardened',
    fn: async (t) => {
      const unit = fs.readFileSync(path.join(ROOT, 'systemd/pacerd.service'), 'utf8');
      for (const line of ['Type=notify', 'DynamicUser=yes', 'ProtectSystem=strict', 'NoNewPrivileges=yes',
        'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX', 'SystemCallFilter=@system-service', 'ExecReload=/bin/kill -HUP $MAINPID'])
        assert.ok(unit.split('\n').includes(line), `the unit lacks ${line}`);
      // verify needs the ExecStart binary to exist: point a copy at this build.
      const copy = path.join(t.dir, 'pacerd.service');
      fs.writeFileSync(copy, unit.replace(/^(ExecStart(?:Pre)?=)\S+/gm, `$1${PACERD_BIN}`));
      // --man=no: the unit's Documentation= pages are installed by the package, not by a
      // build; tests/package/deb-inside.sh verifies the installed unit with them.
      const r = spawnSync('systemd-analyze', ['verify', '--man=no', copy], { encoding: 'utf8', timeout: 20000 });
      assert.equal(r.status, 0, `systemd-analyze verify: ${r.stdout}${r.stderr}`);
      const complaints = (r.stderr || '').split('\n').filter((l) => l.includes('pacerd.service'));
      assert.deepEqual(complaints, [], complaints.join('\n'));
    },
  },
];
