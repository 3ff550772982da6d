// SPDX-License-Identifier: Apache-2.0
// A real Prometheus (Debian's `prometheus`) scraping one pacerd's admin port every
// second, for cases/metrics.mjs and cases/dashboard.mjs: its own temporary
// directory, a free loopback port, stopped with the test.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { request } from './http.mjs';
import { Proc } from './proc.mjs';
import { SLOW, freePort, makeTmpDir, tryConnect, waitFor } from './util.mjs';

/**
 * Starts it against 127.0.0.1:aport and waits for its first scrape (pacerd_up).
 * Returns {prom, port, query(q) -> the result vector, alive() -> throws if it exited,
 * up: pacerd_up's result}.
 */
export async function startPrometheus(t, aport) {
  const dir = makeTmpDir();
  t.defer(() => fs.rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), [
    'global:',
    '  scrape_interval: 1s',
    '  scrape_timeout: 1s',
    '  evaluation_interval: 1s',
    'scrape_configs:',
    '  - job_name: pacerd',
    '    static_configs:',
    `      - targets: ['127.0.0.1:${aport}']`,
    '',
  ].join('\n'));
  const prom = new Proc('prometheus', 'prometheus', [
    `--config.file=${path.join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
  ], { cwd: dir });
  t.defer(() => prom.stop(15000));
  const alive = () => { if (!prom.alive) throw new Error(`prometheus exited ${JSON.stringify(prom.exit)}:\n${prom.stderr.slice(-2000)}`); };
  const query = async (q) => {
    const r = await request(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
    assert.equal(r.status, 200, `${q}: ${r.body.toString()}`);
    const j = JSON.parse(r.body.toString());
    assert.equal(j.status, 'success', q);
    return j.data.result;
  };
  const up = await waitFor(async () => {
    alive();
    if ((await tryConnect(port)) !== 'open') return null;
    const r = await query('pacerd_up');
    return r.length ? r : null;
  }, { timeout_ms: 45000 * SLOW, interval_ms: 250, what: 'prometheus to scrape pacerd_up' });
  return { prom, port, query, alive, up };
}
