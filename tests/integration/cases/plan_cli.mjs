// SPDX-License-Identifier: Apache-2.0
// `pacerd plan`, the pre-flight report: the table, the budget warning, --json,
// --ascii, exit codes 0 / 3 / 2 / 1, and -c FILE taking a provider's, a key's or a model's plan.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

// A UTF-8 terminal in UTC unless a test says otherwise; no PACERD_* from the
// caller's environment changes a configuration's plan.
const UTF8 = { LC_ALL: '', LC_CTYPE: '', LANG: 'C.UTF-8', TZ: 'UTC', PACERD_RPM: undefined, PACERD_RPS: undefined };

function plan(t, args, env = {}) {
  return t.runPacerd(['plan', ...args], { env: { ...UTF8, ...env } });
}

async function planJson(t, args) {
  const r = await plan(t, [...args, '--json']);
  assert.ok(r.code === 0 || r.code === 3, `exit ${r.code}: ${r.stderr}`);
  return { code: r.code, j: JSON.parse(r.stdout) };
}

/** The value cell of the table row labelled `label` (│ label │ value │). */
function row(stdout, label, bar = '│') {
  const line = stdout.split('\n').find((l) => l.startsWith(`${bar} ${label} `));
  assert.ok(line, `no row '${label}' in\n${stdout}`);
  return line.split(bar)[2].trim();
}

// Two providers on plans of their own; one key of openai on a plan of its own.
const configText = `listen: 127.0.0.1:1
admin: { listen: "" }
providers:
  openai: { plan: tier3 }
  anthropic: { plan: tier2 }
plans:
  tier3: { max_requests_per_minute: 5000, max_tokens_per_minute: 800000 }
  tier2: { max_requests_per_minute: 1000, max_concurrent: 8 }
  batch: { max_requests_per_minute: 60 }
keys:
  - { provider: openai, key_sha256: 3f9a1c0b7d2e, plan: batch }
`;

function writeConfig(t, name = 'plan.yaml', text = configText) {
  const f = path.join(t.dir, name);
  fs.writeFileSync(f, text);
  return f;
}

export const tests = [
  {
    name: '200 requests at 60 RPM, 3 workers of 1.5 s: exit 0, 3 min 20 s, every 3 s, staggered 1 s',
    fn: async (t) => {
      const r = await plan(t, ['--requests', '200', '--rpm', '60', '--concurrency', '3', '--latency-ms', '1500']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^┌─/);
      assert.match(r.stdout, /│ estimated duration +│ 3 min 20 s +│\n/);
      assert.equal(row(r.stdout, 'throughput'), '60 req/min (1 req/s)');
      assert.equal(row(r.stdout, 'workers'), '3, each sending every 3 s');
      assert.equal(row(r.stdout, 'stagger'), '1 s between workers');
      assert.equal(row(r.stdout, 'effective concurrency'), '2 in flight at most');
      assert.equal(row(r.stdout, 'binding constraint'), 'rpm 60');
      assert.match(row(r.stdout, 'completion'), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
      assert.doesNotMatch(r.stdout, /warning/);
    },
  },
  {
    name: '1,000 requests at 60 RPM in 10m: exit 3, warning with 600 requests, 17m, 100 RPM',
    fn: async (t) => {
      const r = await plan(t, ['--requests', '1000', '--rpm', '60', '--time-budget', '10m']);
      assert.equal(r.code, 3, r.stderr);
      assert.equal(row(r.stdout, 'time budget'), '10 min: does not fit');
      assert.match(r.stdout, /warning: 1,000 requests take 16 min 40 s; the time budget is 10 min\./);
      assert.match(r.stdout, /fewer requests: 600 fit in 10 min \(--requests 600\)/);
      assert.match(r.stdout, /a longer budget: 17 min \(--time-budget 17m\)/);
      assert.match(r.stdout, /a higher limit: rpm 100 \(--rpm 100\)/);
      // The same run in a budget that holds it: exit 0.
      const ok = await plan(t, ['--requests', '1000', '--rpm', '60', '--time-budget', '1000']);
      assert.equal(ok.code, 0, ok.stdout);
      assert.equal(row(ok.stdout, 'time budget'), '16 min 40 s: fits');
    },
  },
  {
    name: '--json: one object with the plan and the options',
    fn: async (t) => {
      const { code, j } = await planJson(t, ['--requests', '1000', '--rpm', '60', '--time-budget', '10m',
        '--avg-tokens', '900', '--tpm', '100000']);
      assert.equal(code, 3);
      assert.equal(j.requests, 1000);
      assert.equal(j.binding, 'rpm');
      assert.equal(j.throughput_rpm, 60);
      assert.equal(j.duration_ms, 1000000);
      assert.equal(j.duration, '16 min 40 s');
      assert.equal(j.estimated_tokens, 900000);
      assert.equal(j.fits, false);
      assert.equal(j.time_budget_ms, 600000);
      assert.deepEqual(j.options, { requests: 600, time_budget_ms: 1020000, time_budget: '17m',
        limits: [{ name: 'rpm', value: 100 }] });
      assert.deepEqual(j.constraints.map((c) => [c.name, c.binding]), [['rpm', true], ['tpm', false]]);
      assert.ok(Date.parse(j.completion) - Date.parse(j.start) === 1000000, `${j.start} .. ${j.completion}`);

      const u = await planJson(t, ['--requests', '5']);
      assert.equal(u.code, 0);
      assert.equal(u.j.unbounded, true);
      assert.equal(u.j.throughput_rps, null);
      assert.equal(u.j.binding, null);
    },
  },
  {
    name: '--ascii, or a locale that is not UTF-8: not one byte >= 0x80',
    fn: async (t) => {
      const args = ['--requests', '200', '--rpm', '60', '--time-budget', '1m'];
      for (const [extra, env] of [[['--ascii'], {}], [[], { LANG: 'C' }], [[], { LC_ALL: 'POSIX' }]]) {
        const r = await t.runPacerd(['plan', ...args, ...extra], { env: { ...UTF8, ...env } });
        assert.equal(r.code, 3, r.stderr);
        const bytes = Buffer.from(r.stdout, 'utf8');
        assert.ok(bytes.every((b) => b < 0x80), `non-ASCII output with ${JSON.stringify({ extra, env })}:\n${r.stdout}`);
        assert.match(r.stdout, /^\+-+\+-+\+\n/);
        assert.equal(row(r.stdout, 'estimated duration', '|'), '3 min 20 s');
      }
    },
  },
  {
    name: 'bad usage exits 2 and names the flag',
    fn: async (t) => {
      const cases = [
        [['--requests', '0'], /--requests/],
        [['--requests', 'lots'], /--requests/],
        [['--rpm', '60'], /--requests is required/],
        [['--requests', '10', '--rpm', '-5'], /--rpm/],
        [['--requests', '10', '--rps', 'abc'], /--rps/],
        [['--requests', '10', '--rmp', '60'], /unknown flag '--rmp'/],
        [['--requests', '10', '--time-budget', '10x'], /--time-budget/],
        [['--requests', '10', '--concurrency', '2.5'], /--concurrency/],
        [['--requests', '10', '--tpm', '1000'], /--tpm needs --avg-tokens/],
        [['--requests', '10', '--latency-ms'], /--latency-ms needs a value/],
        [['--requests', '10', '--provider', 'openai'], /--provider needs -c/],
        [['--requests', '10', 'now'], /unexpected argument 'now'/],
      ];
      for (const [args, msg] of cases) {
        const r = await plan(t, args);
        assert.equal(r.code, 2, `${args.join(' ')}: exit ${r.code}`);
        assert.match(r.stderr, msg, args.join(' '));
        assert.equal(r.stdout, '');
      }
    },
  },
  {
    name: '-c FILE: the plan of a provider, of a key override, flags beside it override',
    fn: async (t) => {
      const f = writeConfig(t);
      const prov = await planJson(t, ['-c', f, '--provider', 'anthropic', '--requests', '500']);
      assert.equal(prov.code, 0);
      assert.equal(prov.j.source.provider, 'anthropic');
      assert.equal(prov.j.source.plan, 'tier2');
      assert.equal(prov.j.source.key_override, false);
      assert.equal(prov.j.binding, 'rpm');
      assert.equal(prov.j.throughput_rpm, 1000);
      assert.equal(prov.j.duration_ms, 30000);

      // No --provider: the default provider (openai, tier3).
      const def = await planJson(t, ['--config', f, '--requests', '500']);
      assert.equal(def.j.source.plan, 'tier3');
      assert.equal(def.j.throughput_rpm, 5000);
      assert.deepEqual(def.j.not_counted, ['tpm', 'concurrency']);

      // A key whose hash starts with the configured prefix gets its own plan.
      const key = await plan(t, ['-c', f, '--provider', 'openai', '--key-sha256', '3F9A1C0B7D2E' + '0'.repeat(52),
        '--requests', '1000', '--time-budget', '10m']);
      assert.equal(key.code, 3, key.stderr);
      assert.match(row(key.stdout, 'plan'), /^batch \(keys: entry for openai, key 3f9a1c0b7d2e0+\)$/);
      assert.equal(row(key.stdout, 'binding constraint'), 'rpm 60');
      assert.match(key.stdout, /a higher limit: rpm 100/);
      const other = await planJson(t, ['-c', f, '--key-sha256', 'aaaaaaaaaaaa', '--requests', '1000']);
      assert.equal(other.j.source.plan, 'tier3');
      assert.equal(other.j.source.key_override, false);

      // A flag beside -c overrides the plan's value; the concurrency from the
      // file is a ceiling until --latency-ms makes it count.
      const over = await planJson(t, ['-c', f, '--provider', 'anthropic', '--requests', '500', '--rpm', '30',
        '--latency-ms', '60000']);
      assert.equal(over.j.constraints.find((c) => c.name === 'rpm').value, 30);
      assert.equal(over.j.binding, 'concurrency'); // 8 in flight of 60 s: 8 per minute
      assert.equal(over.j.throughput_rpm, 8);
      assert.equal(over.j.workers, 8);
    },
  },
  {
    name: '-c FILE --model: the plan a model gets (a key\'s own, then model_plans, then the provider\'s) and its group',
    fn: async (t) => {
      const f = writeConfig(t, 'models.yaml', `listen: 127.0.0.1:1
admin: { listen: "" }
providers:
  openai:
    plan: big
    model_groups: { "gpt-4o-mini*": gpt-4o-mini }
    model_plans: { "gpt-4o-mini*": small, "gpt-4o-mini-2024-07-18": big, "o[134]*": small }
  anthropic: {}
plans:
  big: { max_requests_per_second: 2 }
  small: { max_requests_per_second: 20 }
keys:
  - { provider: openai, key_sha256: 3f9a1c0b7d2e, plan: default }
  - { provider: openai, key_sha256: aaaaaaaaaaaa, scope: proj-1 }
`);
      // Without --requests: only the choice.
      const m = await plan(t, ['-c', f, '--provider', 'openai', '--model', 'gpt-4o-mini']);
      assert.equal(m.code, 0, m.stderr);
      assert.match(m.stdout, /^plan +small \(model_plans: 'gpt-4o-mini\*'\)$/m);
      assert.match(m.stdout, /^group +gpt-4o-mini \(model_groups: 'gpt-4o-mini\*'\)$/m);
      const exact = await planJson(t, ['-c', f, '--model', 'gpt-4o-mini-2024-07-18']);
      assert.equal(exact.j.plan, 'big');
      assert.equal(exact.j.plan_pattern, 'gpt-4o-mini-2024-07-18');
      const none = await planJson(t, ['-c', f, '--model', 'gpt-4.1']);
      assert.equal(none.j.plan, 'big');
      assert.equal(none.j.plan_pattern, null);
      assert.equal(none.j.group, 'gpt-4.1');
      // A key's own plan wins over the model's; a scope-only entry does not.
      const key = await planJson(t, ['-c', f, '--model', 'o3-mini', '--key-sha256', '3f9a1c0b7d2e']);
      assert.equal(key.j.plan, 'default');
      assert.equal(key.j.key_override, true);
      const scoped = await planJson(t, ['-c', f, '--model', 'o3-mini', '--key-sha256', 'aaaaaaaaaaaa']);
      assert.equal(scoped.j.plan, 'small');
      assert.equal(scoped.j.key_override, false);
      // Anthropic's built-in classes.
      const a = await planJson(t, ['-c', f, '--provider', 'anthropic', '--model', 'claude-sonnet-4-5-20250929']);
      assert.equal(a.j.group, 'claude-sonnet-4');
      assert.equal(a.j.group_pattern, 'claude-sonnet-4*');
      // With --requests: the report, its plan row naming the row that chose.
      const r = await plan(t, ['-c', f, '--model', 'gpt-4o-mini', '--requests', '100']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(row(r.stdout, 'plan'), "small (model_plans 'gpt-4o-mini*' for model gpt-4o-mini, provider openai)");
      assert.equal(row(r.stdout, 'binding constraint'), 'rps 20');
      const j = await planJson(t, ['-c', f, '--model', 'gpt-4o-mini', '--requests', '100']);
      assert.equal(j.j.source.model, 'gpt-4o-mini');
      assert.equal(j.j.source.model_pattern, 'gpt-4o-mini*');
      // --model needs -c; a bad pattern in the file is reported at line:column.
      const u = await plan(t, ['--model', 'x']);
      assert.equal(u.code, 2);
      assert.match(u.stderr, /--model needs -c FILE/);
      const bad = writeConfig(t, 'badpat.yaml', 'providers:\n  openai:\n    model_plans:\n      "gpt-[4o*": default\n');
      const b = await plan(t, ['-c', bad, '--model', 'gpt-4o']);
      assert.equal(b.code, 1);
      assert.match(b.stderr, /badpat\.yaml:4:7: providers\.openai\.model_plans: model pattern 'gpt-\[4o\*': '\[' at character 5 is not closed/);
    },
  },
  {
    name: '-c FILE: an unknown provider exits 2, an invalid file exits 1 with file:line:column',
    fn: async (t) => {
      const f = writeConfig(t);
      const u = await plan(t, ['-c', f, '--provider', 'nope', '--requests', '5']);
      assert.equal(u.code, 2);
      assert.match(u.stderr, /--provider: no provider 'nope'.*openai, anthropic/);
      const bad = writeConfig(t, 'bad.yaml', 'plans:\n  x: { max_requests_per_minut: 5 }\n');
      const b = await plan(t, ['-c', bad, '--requests', '5']);
      assert.equal(b.code, 1);
      assert.match(b.stderr, /bad\.yaml:2:\d+:/);
      const k = await plan(t, ['-c', f, '--key-sha256', 'xyz', '--requests', '5']);
      assert.equal(k.code, 2);
      assert.match(k.stderr, /--key-sha256/);
    },
  },
  {
    name: 'pacerd plan --help documents every flag; pacerd --help names plan',
    fn: async (t) => {
      const h = await plan(t, ['--help']);
      assert.equal(h.code, 0);
      for (const flag of ['--requests', '--rps', '--rpm', '--rph', '--min-ms', '--tpm', '--concurrency',
        '--latency-ms', '--avg-tokens', '--time-budget', '--config', '--provider', '--key-sha256', '--model', '--json',
        '--ascii']) {
        assert.match(h.stdout, new RegExp(`^  (-c, )?${flag}\\b`, 'm'), flag);
      }
      assert.match(h.stdout, /Exit status/);
      const m = await t.runPacerd(['--help']);
      assert.equal(m.code, 0);
      assert.match(m.stdout, /pacerd plan --requests N/);
    },
  },
];
