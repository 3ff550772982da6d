// SPDX-License-Identifier: Apache-2.0
// h. Agent serialization (agents.mode serialize | reject, header X-Agent-Id).
// The mock answers every LLM request after latency_ms 200; its records give each
// request's arrival (t_ms) and headers, so a request of an agent occupies
// [t_ms, t_ms + 200] at the mock: two of one agent closer than 200 ms overlapped
// (counted below 180 ms: the mock's timer and t_ms have a few ms of slack; a real
// overlap shows gaps near 0, as the mode-off control does).
// Each test has a mock of its own and pacerds of its own.
import assert from 'node:assert/strict';
import { SLOW, assertPacerError, recHeader } from '../lib.mjs';
import { chatBody, runLoad, send, startPacerdFor, summarize } from '../load.mjs';

const LATENCY = 200;
const AGENTS = ['agent-a', 'agent-b', 'agent-c'];
const PER_AGENT = 4;

// Agent-major order (a, a, a, a, b, …): the FIFO's head is one agent's, so serialize mode
// must dispatch the next eligible request (another agent's) past the busy one.
const agentRequest = (key) => (i) => {
  const agent = AGENTS[Math.floor(i / PER_AGENT)];
  return {
    path: '/v1/chat/completions',
    // x-scen-agent: a copy for the records, in case pacerd does not forward X-Agent-Id.
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-agent-id': agent, 'x-scen-agent': agent },
    body: chatBody({ max_tokens: 16 }),
  };
};

/** Per agent: the smallest gap between consecutive arrivals at the mock, and the overlaps. */
function gaps(recs) {
  const byAgent = {};
  for (const r of recs) (byAgent[recHeader(r, 'x-scen-agent')] ??= []).push(r.t_ms);
  const out = {};
  for (const [a, ts] of Object.entries(byAgent)) {
    ts.sort((x, y) => x - y);
    const d = ts.slice(1).map((x, i) => x - ts[i]);
    out[a] = { n: ts.length, minGap: d.length ? Math.min(...d) : null, overlaps: d.filter((x) => x < LATENCY * 0.9).length };
  }
  return out;
}

async function runAgents(t, mock, mode, key) {
  const p = await startPacerdFor(t, mock, { agents: { mode } });
  await mock.reset();
  const n = AGENTS.length * PER_AGENT;
  const run = await runLoad({ base: p.url, n, concurrency: n, makeRequest: agentRequest(key), deadline_ms: 10000 });
  const sum = summarize(run);
  const st = await mock.stats();
  const g = gaps(await mock.requests());
  return { p, run, sum, st, g };
}

export const tests = [
  {
    // Control first (mode off): the same load does overlap per agent, so the check can fail.
    name: 'h. serialize: at most one request in flight per X-Agent-Id (mode off overlaps, as a control); other agents proceed',
    timeout_ms: 20000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { latency_ms: LATENCY } });
      const off = await runAgents(t, mock, 'off', 'sk-scen-h-off');
      const ser = await runAgents(t, mock, 'serialize', 'sk-scen-h-ser');
      console.log(`# scenario h: mode off: ${JSON.stringify(off.g)} wall=${off.run.wall_ms} ms in_flight_max=${off.st.in_flight_max}; ` +
        `serialize: ${JSON.stringify(ser.g)} wall=${ser.run.wall_ms} ms in_flight_max=${ser.st.in_flight_max}, statuses ${JSON.stringify(ser.sum.statuses)}`);
      assert.equal(off.sum.client_errors, 0, `mode off: ${JSON.stringify(off.sum.statuses)}`);
      assert.ok(Object.values(off.g).some((x) => x.overlaps > 0), `control (mode off) shows no overlap: the check below would prove nothing: ${JSON.stringify(off.g)}`);
      assert.equal(ser.sum.client_errors, 0, `serialize: ${JSON.stringify(ser.sum.statuses)}\n${ser.sum.firstErrors.join('\n')}`);
      assert.equal(ser.st.requests, AGENTS.length * PER_AGENT);
      for (const a of AGENTS) {
        assert.equal(ser.g[a]?.n, PER_AGENT, `agent ${a}: ${JSON.stringify(ser.g[a])}`);
        assert.equal(ser.g[a].overlaps, 0, `agent ${a}: two requests in flight at once (arrivals ${ser.g[a].minGap} ms apart, latency ${LATENCY} ms)`);
      }
      // One busy agent does not block the others: 3 agents × 4 × 200 ms run side by side
      // (≈ 0.8 s), not one after another (≥ 2.4 s).
      assert.ok(ser.st.in_flight_max >= 2, `serialize: only ${ser.st.in_flight_max} request(s) in flight at once: agents were not run side by side`);
      assert.ok(ser.run.wall_ms < 2000 * SLOW, `serialize: wall ${ser.run.wall_ms} ms for 3 agents × 4 × ${LATENCY} ms (side by side ≈ 800 ms)`);
    },
  },
  {
    name: 'h. reject: a second request of a busy agent gets 409 agent_busy at once; other agents and later requests pass',
    timeout_ms: 15000,
    fn: async (t) => {
      const mock = await t.startMock({ config: { latency_ms: LATENCY } });
      const p = await startPacerdFor(t, mock, { agents: { mode: 'reject' } });
      const req = (agent) => send(`${p.url}/v1/chat/completions`, {
        headers: { authorization: 'Bearer sk-scen-h-rej', 'content-type': 'application/json', 'x-agent-id': agent, 'x-scen-agent': agent },
        body: chatBody({ max_tokens: 16 }), timeout_ms: 5000,
      });
      const first = req('agent-a');
      // Wait until the first one is at the mock (in flight), then the same agent again.
      for (let i = 0; i < 100 && (await mock.stats()).in_flight < 1; i++) await new Promise((r) => setTimeout(r, 10));
      const [second, other] = await Promise.all([req('agent-a'), req('agent-b')]);
      const r1 = await first;
      console.log(`# scenario h (reject): first ${r1.status} in ${r1.end - r1.start} ms; same agent ${second.status} in ${second.end - second.start} ms ` +
        `(${second.body?.slice(0, 160)}); other agent ${other.status} in ${other.end - other.start} ms`);
      assert.equal(r1.status, 200);
      assert.equal(other.status, 200, `other agent: ${other.status} ${other.body}`);
      assertPacerError({ status: second.status, headers: second.headers ?? {}, text: () => second.body ?? String(second.error) }, 409, 'agent_busy');
      assert.ok(second.end - second.start < 100 * SLOW, `agent_busy took ${second.end - second.start} ms (expected at once)`);
      const recs = await mock.requests();
      assert.deepEqual(recs.map((r) => recHeader(r, 'x-scen-agent')).sort(), ['agent-a', 'agent-b'], 'the rejected request never reached the mock');
      // Once the first is done, the agent may send again.
      const again = await req('agent-a');
      assert.equal(again.status, 200, `agent-a after its request finished: ${again.status} ${again.body}`);
    },
  },
];
