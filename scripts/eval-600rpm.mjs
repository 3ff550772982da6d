// SPDX-License-Identifier: Apache-2.0
// The headline case, measured: an eval fires 1,000 concurrent requests at a
// provider that allows 600 requests per minute. Through pacerd it should see no
// error and take about 100 s, whether or not pacerd is told the limit.
//
//   node scripts/eval-600rpm.mjs [N=1000] [RPM=600]     (after make; ~3.5 min)
//
// The provider is build/pacerd-mock with OpenAI-style limits (a per-key bucket
// of RPM requests refilling at RPM/min, x-ratelimit-* headers, 429 + retry-after
// past it). Runs, in turn: pacerd with `max_requests_per_minute: RPM`, pacerd
// with no plan at all (learning from the headers), and the bare mock (what the
// eval would see without pacerd). Everything on 127.0.0.1; processes stopped by PID.
import { Mock, Pacerd, freePort, makeTmpDir } from '../tests/integration/lib.mjs';
import { runLoad, summarize, toYaml } from '../tests/integration/load.mjs';

const N = Number(process.argv[2] ?? 1000);
const RPM = Number(process.argv[3] ?? 600);
const deadline_ms = Math.ceil((N / RPM) * 60000 * 1.6 + 10000);
const body = JSON.stringify({ model: 'gpt-mock', max_tokens: 16, messages: [{ role: 'user', content: 'grade this answer' }] });
const makeRequest = () => ({ path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-eval-0001' }, body });

async function once(label, plan) {
  const mock = await Mock.start({ config: { style: 'openai', rpm: RPM } });
  let p = null;
  let base = mock.url;
  try {
    if (plan !== undefined) {
      const port = await freePort();
      const cfg = { listen: `127.0.0.1:${port}`, admin: { listen: '' }, log: { level: 'warn' }, providers: { openai: { upstream: mock.url } } };
      if (plan) cfg.plans = { default: plan };
      p = await Pacerd.start({ dir: makeTmpDir(), config: toYaml(cfg), port });
      base = p.url;
    }
    const run = await runLoad({ base, n: N, concurrency: N, makeRequest, deadline_ms, timeout_ms: deadline_ms });
    const sum = summarize(run);
    const st = await mock.stats();
    const q = run.results.map((r) => Number(r.headers?.['x-pacer-queue-ms'])).filter(Number.isFinite).sort((a, b) => a - b);
    const p99 = q.length ? q[Math.min(q.length - 1, Math.floor(q.length * 0.99))] : 0;
    console.log(`${label.padEnd(34)} wall ${(run.wall_ms / 1000).toFixed(1)} s, ok ${sum.completed - sum.client_errors}/${N}, ` +
      `client errors ${sum.client_errors} ${JSON.stringify(sum.statuses)}, upstream 429s ${st.responses['429'] ?? 0} ` +
      `of ${st.requests} upstream requests, p99 queue ${p99} ms`);
  } finally {
    if (p) await p.stop();
    await mock.stop();
  }
}

console.log(`${N} concurrent requests, provider limit ${RPM} RPM: ≈ ${((N - 1) / RPM * 60).toFixed(0)} s evenly paced, ` +
  `≈ ${(Math.max(0, N - RPM) / RPM * 60).toFixed(0)} s at best against a bucket that starts full`);
await once(`pacerd, max_requests_per_minute: ${RPM}`, { max_requests_per_minute: RPM });
await once('pacerd, no plan (learning)', null);
await once('no pacerd (straight to the provider)', undefined);
