// Scheduler scenarios with no plan in pacerd (zero configuration: learning from the
// rate-limit headers, AIMD, retries): b. a 300 RPM upstream, c. a TPM upstream,
// g. an upstream whose capacity flaps between 20 and 5 rps.
// Each test has a mock of its own and a pacerd of its own; figures are the mock's counts.
import assert from 'node:assert/strict';
import { SLOW, keyHash } from '../lib.mjs';
import { chatBody, events, logDigest, runLoad, scenarioLine, startPacerdFor, summarize } from '../load.mjs';

const chat = (key, max_tokens = 16, content) => () => ({
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  body: chatBody({ max_tokens, content }),
});

/**
 * The share of what a refilling bucket (capacity C, refill ρ per s, full at the start)
 * could admit during the run that was used: ok / (C + ρ·wall). The scenario line's
 * goodput (ok per second ÷ ρ) exceeds 100 % on short runs because the bucket starts full.
 */
function admissible(id, ok, cap, rho, wall_ms) {
  const v = ok / (cap + rho * (wall_ms / 1000)) * 100;
  console.log(`#   ${id}: used ${v.toFixed(1)}% of what the mock could admit in that time (bucket ${cap} full at the start + ${rho}/s)`);
  return v;
}

function learnedLines(p) {
  return events(p, 'limit_learned').slice(0, 4).map((l) => JSON.stringify(l).slice(0, 260)).join('\n#     ');
}

export const tests = [
  {
    // b. The mock: 300 RPM per key (bucket of 300, full at the start, refilling 5/s), OpenAI
    // headers. 360 requests: 300 pass from the full bucket, the last 60 need the refill,
    // ideally (360 − 300)/5 = 12 s (a little less: the bucket refills while the first 300 go);
    // pacing at ~0.95 × the learned rate makes it ~12.6 s. Bound: 24 s (twice the ideal).
    name: 'b. no plan, mock 300 RPM with OpenAI headers, 360 requests: no client error, upstream 429 ≤ 5 %',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', rpm: 300 } });
      const p = await startPacerdFor(t, mock);
      const key = 'sk-scen-b-0001';
      const N = 360;
      const run = await runLoad({ base: p.url, n: N, concurrency: 40, makeRequest: chat(key), deadline_ms: 28000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const up429 = st.responses['429'] ?? 0;
      scenarioLine('b', { sum, wall_ms: run.wall_ms, limit_rps: 5, upstream429: up429, sent: N });
      admissible('b', sum.ok, 300, 5, run.wall_ms);
      console.log(`#   b: mock requests=${st.requests} responses=${JSON.stringify(st.responses)} window_violations=${st.window_violations} in_flight_max=${st.in_flight_max}; ` +
        `client statuses=${JSON.stringify(sum.statuses)} retried=${sum.retried}; pacerd limit_learned lines=${events(p, 'limit_learned').length}\n#     ${learnedLines(p)}`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of ${N} requests answered within the 28 s bound (ideal ≈ 12 s): ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
      assert.ok(up429 <= 0.05 * N, `${up429} upstream 429s for ${N} requests (> 5 %)${why}`);
      assert.ok(run.wall_ms <= 24000 * SLOW, `wall ${(run.wall_ms / 1000).toFixed(2)} s, ideal ≈ 12 s`);
    },
  },
  {
    // c. The mock: 60 000 TPM per key (bucket full at the start, refilling 1000 tokens/s),
    // OpenAI headers for tokens only. Each request costs the mock 10 (prompt: 40 characters
    // / 4) + 500 (max_tokens) = 510 tokens: 117 pass from the full bucket, then ~1.96/s;
    // 140 requests ≈ 12 s ideally. The mock's usage reports only ~15 tokens per answer:
    // pacerd must not take that as the cost the upstream charges (OpenAI counts max_tokens).
    name: 'c. no plan, mock 60k TPM, requests with max_tokens 500: no client-visible error',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', tpm: 60000 } });
      const p = await startPacerdFor(t, mock);
      const key = 'sk-scen-c-0001';
      const N = 140;
      const content = 'Count the tokens of this forty-char text'; // 40 characters
      assert.equal(content.length, 40);
      const run = await runLoad({ base: p.url, n: N, concurrency: 20, makeRequest: chat(key, 500, content), deadline_ms: 28000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const up429 = st.responses['429'] ?? 0;
      const rho = 60000 / 60 / 510; // requests per second the refill allows
      scenarioLine('c', { sum, wall_ms: run.wall_ms, limit_rps: rho, upstream429: up429, sent: N });
      admissible('c', sum.ok, Math.floor(60000 / 510), Number(rho.toFixed(2)), run.wall_ms);
      console.log(`#   c: mock requests=${st.requests} responses=${JSON.stringify(st.responses)} window_violations=${st.window_violations}; ` +
        `client statuses=${JSON.stringify(sum.statuses)} retried=${sum.retried}\n#     ${learnedLines(p)}`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of ${N} requests answered within the 28 s bound (ideal ≈ 12 s): ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(st.keys[keyHash(key)]?.requests - (st.keys[keyHash(key)]?.rate_limited ?? 0), N, 'successful upstream requests');
    },
  },
  {
    // g. The mock's global capacity flaps: 20 rps for 2 s, 5 rps for 2 s, repeating (12.5 rps
    // on average); over it, it answers 429 (retry-after: 1), 503, 529 in turn. No plan in
    // pacerd: AIMD and retries must get every one of 120 requests through (≈ 9.6 s ideally).
    // The waste (upstream overload answers) is printed, not asserted. The wall time is held
    // to 20 s (about twice the ideal): beyond "every request succeeds", a lane that crawls
    // for tens of seconds after one burst of errors is the 429 storm's opposite failure, and
    // without a bound below the run's 28 s deadline the outcome would be a coin toss.
    name: 'g. no plan, capacity flapping 20/5 rps with 429/503/529: every request succeeds',
    timeout_ms: 40000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdFor(t, mock);
      const key = 'sk-scen-g-0001';
      const N = 120;
      // Configured just before the run: the capacity schedule starts now.
      await mock.configure({ style: 'openai', capacity: [{ rps: 20, ms: 2000 }, { rps: 5, ms: 2000 }], overload_status: [429, 503, 529] });
      const run = await runLoad({ base: p.url, n: N, concurrency: 20, makeRequest: chat(key), deadline_ms: 28000 });
      const sum = summarize(run);
      const st = await mock.stats();
      const r = st.responses;
      const up429 = r['429'] ?? 0;
      const waste = (r['429'] ?? 0) + (r['503'] ?? 0) + (r['529'] ?? 0);
      scenarioLine('g', { sum, wall_ms: run.wall_ms, limit_rps: 12.5, upstream429: up429, sent: N });
      console.log(`#   g: waste: upstream 429=${r['429'] ?? 0} 503=${r['503'] ?? 0} 529=${r['529'] ?? 0} (${waste} overload answers for ${N} requests, ` +
        `${(waste / st.requests * 100).toFixed(1)}% of ${st.requests} upstream requests); client statuses=${JSON.stringify(sum.statuses)}, ` +
        `max x-pacer-attempts=${sum.max_attempts}; pacerd retry lines=${events(p, 'retry').length}, concurrency_changed=${events(p, 'concurrency_changed').length}`);
      const why = `\n${sum.firstErrors.join('\n')}\n${logDigest(p)}`;
      assert.equal(sum.unfinished, 0, `only ${sum.completed} of ${N} requests answered within the 28 s bound (ideal ≈ 9.6 s): ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(sum.client_errors, 0, `client-visible errors: ${JSON.stringify(sum.statuses)}${why}`);
      assert.equal(r['200'], N, `upstream 200s: ${JSON.stringify(r)}`);
      assert.ok(run.wall_ms <= 20000 * SLOW, `wall ${(run.wall_ms / 1000).toFixed(2)} s for ${N} requests at 12.5 rps on average (ideal ≈ 9.6 s, bound 20 s)${why}`);
    },
  },
];
