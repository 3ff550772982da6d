// SPDX-License-Identifier: Apache-2.0
// Configuration errors: file:line:column, --check-config, refusing to start, PACERD_*.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { freePort, request, toYaml, tryConnect } from '../lib.mjs';
import { startPacerdWithAdmin } from '../load.mjs';

function write(dir, name, text) {
  const f = path.join(dir, name);
  fs.writeFileSync(f, text);
  return f;
}

// Line 4, column 3: an unknown key inside limits.
const unknownKey = 'listen: 127.0.0.1:1\nadmin: { listen: "" }\nlimits:\n  max_bodee_bytes: 10\n';
// Line 3, column 19: a value that is not an integer.
const badValue = 'listen: 127.0.0.1:1\nlimits:\n  max_body_bytes: lots\n';
// Line 4, column 15: a bad value (scheme) for a provider.
const badNested = 'listen: 127.0.0.1:1\nproviders:\n  openai:\n    upstream: "ftp://nowhere"\n';

export const tests = [
  {
    name: '--check-config: an unknown key is reported as FILE:4:3 and exits non-zero',
    fn: async (t) => {
      const f = write(t.dir, 'bad-key.yaml', unknownKey);
      const r = await t.runPacerd(['--check-config', f]);
      assert.notEqual(r.code, 0);
      const out = r.stderr + r.stdout;
      assert.ok(out.includes(`${f}:4:3:`) || out.includes('bad-key.yaml:4:3:'), `expected bad-key.yaml:4:3: in ${JSON.stringify(out)}`);
      assert.match(out, /max_bodee_bytes/);
    },
  },
  {
    name: '--check-config: a bad value is reported as FILE:3:19 and exits non-zero',
    fn: async (t) => {
      const f = write(t.dir, 'bad-value.yaml', badValue);
      const r = await t.runPacerd(['--check-config', f]);
      assert.notEqual(r.code, 0);
      const out = r.stderr + r.stdout;
      assert.ok(out.includes('bad-value.yaml:3:19:'), `expected bad-value.yaml:3:19: in ${JSON.stringify(out)}`);
      assert.match(out, /lots|integer|number/);
      const f2 = write(t.dir, 'bad-nested.yaml', badNested);
      const r2 = await t.runPacerd(['--check-config', f2]);
      assert.notEqual(r2.code, 0);
      assert.ok((r2.stderr + r2.stdout).includes('bad-nested.yaml:4:15:'), `expected bad-nested.yaml:4:15: in ${JSON.stringify(r2.stderr + r2.stdout)}`);
    },
  },
  {
    name: '--check-config on a good file exits 0',
    fn: async (t) => {
      const f = write(t.dir, 'good.yaml', toYaml(t.baseConfig(await freePort())));
      const r = await t.runPacerd(['--check-config', f]);
      assert.equal(r.code, 0, r.stderr);
      const f2 = write(t.dir, 'minimal.yaml', 'listen: 127.0.0.1:8080\n');
      assert.equal((await t.runPacerd(['--check-config', f2])).code, 0);
    },
  },
  {
    name: 'pacerd refuses to start with a bad file: non-zero exit, file:line:column on stderr, port never opened',
    fn: async (t) => {
      const port = await freePort();
      const f = write(t.dir, 'bad-start.yaml', `listen: 127.0.0.1:${port}\nadmin: { listen: "" }\nlog: { level: loud }\n`);
      const r = await t.runPacerd(['-c', f]);
      assert.notEqual(r.code, 0);
      assert.ok(r.stderr.includes('bad-start.yaml:3:'), `stderr: ${JSON.stringify(r.stderr)}`);
      assert.equal(await tryConnect(port, 300), 'refused');
      const missing = await t.runPacerd(['-c', path.join(t.dir, 'does-not-exist.yaml')]);
      assert.notEqual(missing.code, 0);
      assert.match(missing.stderr, /does-not-exist\.yaml/);
    },
  },
  {
    name: 'PACERD_RPM=abc: non-zero exit naming PACERD_RPM; PACERD_LISTEN overrides the file',
    fn: async (t) => {
      const port = await freePort();
      const f = write(t.dir, 'env.yaml', toYaml(t.baseConfig(port)));
      const r = await t.runPacerd(['-c', f], { env: { PACERD_RPM: 'abc' } });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /PACERD_RPM/);
      assert.equal(await tryConnect(port, 300), 'refused');
      const r2 = await t.runPacerd(['--check-config', f], { env: { PACERD_LOG_LEVEL: 'chatty' } });
      assert.notEqual(r2.code, 0);
      assert.match(r2.stderr, /PACERD_LOG_LEVEL/);
      // A good override is applied: pacerd listens where PACERD_LISTEN says, not where the file says.
      const other = await freePort();
      const p = await t.startPacerd({ config: t.baseConfig(port), port: other, env: { PACERD_LISTEN: `127.0.0.1:${other}` } });
      assert.equal(await tryConnect(p.port, 500), 'open');
      assert.equal(await tryConnect(port, 300), 'refused');
    },
  },
  {
    // pacerd.yaml(5) is checked against this list (tests/package/man.sh); here, that the
    // list is what the parser accepts: every default it prints, written into a file, passes
    // --check-config, and one past a bound does not.
    name: '--config-keys: one line per key (path, type, bounds, default); the printed defaults pass --check-config, a value under a bound fails',
    fn: async (t) => {
      const r = await t.runPacerd(['--config-keys']);
      assert.equal(r.code, 0, r.stderr);
      const rows = r.stdout.trim().split('\n').map((l) => l.split('\t'));
      assert.ok(rows.length >= 70, `${rows.length} keys`);
      for (const row of rows) assert.equal(row.length, 4, row.join('|'));
      const byPath = new Map(rows.map(([p, ...rest]) => [p, rest]));
      assert.deepEqual(byPath.get('plans.<name>.queue.max_depth'), ['integer', '1..4294967295', '10000']);
      assert.deepEqual(byPath.get('log.level'), ['enum', 'debug|info|warn|error', 'info']);
      assert.deepEqual(byPath.get('listen'), ['string', '-', '"127.0.0.1:8080"']);
      // Every scalar default, set explicitly: providers.<name> as openai, plans.<name> as default.
      const cfg = {};
      const set = (p, v) => {
        const parts = p.replace('providers.<name>', 'providers.openai').replace('plans.<name>', 'plans.default').split('.');
        let o = cfg;
        for (const k of parts.slice(0, -1)) o = (o[k] ??= {});
        o[parts.at(-1)] = v;
      };
      let n = 0;
      for (const [p, type, , def] of rows) {
        if (def === '-' || p.startsWith('keys[]')) continue;
        const v = type === 'string' ? JSON.parse(def) : type === 'boolean' ? def === 'true' : type === 'enum' ? def : Number(def);
        set(p, v);
        n++;
      }
      const f = write(t.dir, 'defaults.yaml', toYaml(cfg));
      const ok = await t.runPacerd(['--check-config', f]);
      assert.equal(ok.code, 0, `${n} defaults:\n${fs.readFileSync(f, 'utf8')}\n${ok.stdout}${ok.stderr}`);
      // Under a lower bound: rejected, naming the key.
      set('plans.<name>.queue.max_depth', 0);
      const f2 = write(t.dir, 'under.yaml', toYaml(cfg));
      const bad = await t.runPacerd(['--check-config', f2]);
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /max_depth/);
    },
  },
  {
    name: '--version and --help exit 0; an unknown option exits non-zero; --version, /status and pacerd_build_info say what scripts/version.sh says',
    fn: async (t) => {
      const v = await t.runPacerd(['--version']);
      assert.equal(v.code, 0);
      assert.match(v.stdout, /pacerd \d+\.\d+/);
      const want = execFileSync('scripts/version.sh').toString().trim();
      assert.equal(v.stdout.trim(), `pacerd ${want}`);
      const p = await startPacerdWithAdmin(t, await t.startMock());
      const st = JSON.parse((await request(`${p.admin}/status`)).body.toString());
      assert.equal(st.version, want);
      const m = (await request(`${p.admin}/metrics`)).body.toString();
      assert.ok(m.includes(`pacerd_build_info{version="${want}"} 1\n`), `no pacerd_build_info{version="${want}"} 1 in /metrics`);
      const h = await t.runPacerd(['--help']);
      assert.equal(h.code, 0);
      assert.match(h.stdout, /--check-config/);
      const u = await t.runPacerd(['--frobnicate']);
      assert.notEqual(u.code, 0);
    },
  },
];
