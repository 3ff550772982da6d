// SPDX-License-Identifier: Apache-2.0
// The mock's provider-like scopes by themselves (no pacerd, issue 18): budgets per model
// (group), keys grouped into projects that share budgets, the identity headers of the
// answers, OpenAI-Project, and Anthropic's prompt-cache accounting on /v1/messages.
// Every test starts a mock of its own: the shared mock keeps its plain config.
import assert from 'node:assert/strict';
import { request, sleep, streamRequest } from '../lib.mjs';

const chat = (mock, key, model, headers = {}, path = '/v1/chat/completions') => request(`${mock.url}${path}`, {
  method: 'POST',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
  body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }] }),
});

// A /v1/messages request whose system prompt (`prefix`, cached) comes before the question.
const messagesBody = (model, prefix, question, extra = {}) => JSON.stringify({
  model,
  max_tokens: 10,
  system: [{ type: 'text', text: prefix, cache_control: { type: 'ephemeral' } }],
  messages: [{ role: 'user', content: [{ type: 'text', text: question }] }],
  ...extra,
});
const messages = (mock, key, body) => request(`${mock.url}/v1/messages`, {
  method: 'POST',
  headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
  body,
});

const statuses = (rs) => rs.map((r) => r.status);
const inputRemaining = (r) => Number(r.headers['anthropic-ratelimit-input-tokens-remaining']);

export const tests = [
  {
    name: 'model_limits: each model (group) has its own bucket and headers; other models and model-less requests are not limited',
    fn: async (t) => {
      const mock = await t.startMock({
        config: {
          style: 'openai',
          model_limits: [
            { models: ['m-slow'], rpm: 6, burst: 2 },
            { models: ['m-fast'], rpm: 1200, burst: 20 },
            { models: ['g-1', 'g-2'], rpm: 6, burst: 2 },
          ],
        },
      });
      const slow = [];
      for (let i = 0; i < 3; i++) slow.push(await chat(mock, 'sk-one', 'm-slow'));
      assert.deepEqual(statuses(slow), [200, 200, 429]);
      assert.equal(slow[0].headers['x-ratelimit-limit-requests'], '6');
      assert.equal(slow[0].headers['x-ratelimit-remaining-requests'], '1');
      assert.equal(slow[2].json().error.code, 'rate_limit_exceeded');
      assert.ok(Number(slow[2].headers['retry-after']) >= 1, JSON.stringify(slow[2].headers));
      // the fast model's bucket is untouched by the slow one's exhaustion
      const fast = [];
      for (let i = 0; i < 20; i++) fast.push(await chat(mock, 'sk-one', 'm-fast'));
      assert.deepEqual(statuses(fast), Array(20).fill(200));
      assert.equal(fast[0].headers['x-ratelimit-limit-requests'], '1200');
      assert.equal(fast[0].headers['x-ratelimit-remaining-requests'], '19');
      // one group, one budget: g-1 and g-2 share it
      const g = [await chat(mock, 'sk-one', 'g-1'), await chat(mock, 'sk-one', 'g-2'), await chat(mock, 'sk-one', 'g-1')];
      assert.deepEqual(statuses(g), [200, 200, 429]);
      // a model without an entry, and a request without a model: no budget, no headers
      const other = await chat(mock, 'sk-one', 'unlisted');
      assert.equal(other.status, 200);
      assert.equal(other.headers['x-ratelimit-limit-requests'], undefined);
      const list = await request(`${mock.url}/v1/models`, { headers: { authorization: 'Bearer sk-one' } });
      assert.equal(list.status, 200);
      assert.equal(list.headers['x-ratelimit-limit-requests'], undefined);
      // another key has buckets of its own (no projects: the key is the scope)
      assert.equal((await chat(mock, 'sk-two', 'm-slow')).status, 200);
      const s = await mock.stats();
      // tokens: what the 3 passed requests charged the token budgets (prompt + 16 each)
      assert.deepEqual(s.models['m-slow'], { requests: 4, passed: 3, rate_limited: 1, cache_reads: 0, cache_creations: 0, tokens: 51 });
      assert.equal(s.models['m-fast'].rate_limited, 0);
      assert.equal(s.models['m-fast'].passed, 20);
      assert.equal(s.models['g-1'].rate_limited, 1);
      assert.equal(s.models['g-2'].rate_limited, 0);
      assert.deepEqual(s.scopes, {}, 'no projects: no scopes');
      assert.equal(s.rate_limited, 2);
      assert.equal(s.responses['429'], 2);
    },
  },
  {
    name: 'model_limits: "*" catches every other model; a 429 of a model opens a window only for that model',
    fn: async (t) => {
      const mock = await t.startMock({
        config: { style: 'openai', retry_after_s: 5, model_limits: [{ models: ['a'], rpm: 60, burst: 1 }, { models: ['*'], rpm: 60, burst: 1 }] },
      });
      assert.deepEqual(statuses([await chat(mock, 'k', 'a'), await chat(mock, 'k', 'a')]), [200, 429]);
      // a request for another model inside a's window is no violation
      assert.equal((await chat(mock, 'k', 'b')).status, 200);
      assert.equal((await mock.stats()).window_violations, 0);
      assert.equal((await chat(mock, 'k', 'c')).status, 429, '"*" is one group: b and c share it');
      assert.equal((await chat(mock, 'k', 'a')).status, 429);
      assert.equal((await mock.stats()).window_violations, 1, 'the second a inside its own window');
    },
  },
  {
    name: 'projects: two keys of one project share its budget, a key of another project does not; answers name the project',
    fn: async (t) => {
      const mock = await t.startMock({
        config: {
          style: 'openai',
          rpm: 6,
          burst: 3,
          projects: [
            { id: 'proj_shared', organization: 'org-one', keys: ['sk-a1', 'sk-a2'] },
            { id: 'proj_other', organization: 'org-two', keys: ['sk-b1'] },
          ],
        },
      });
      const a = [];
      for (const k of ['sk-a1', 'sk-a2', 'sk-a1', 'sk-a2']) a.push(await chat(mock, k, 'gpt-mock'));
      assert.deepEqual(statuses(a), [200, 200, 200, 429]);
      assert.deepEqual(a.map((r) => r.headers['x-ratelimit-remaining-requests']), ['2', '1', '0', '0']);
      for (const r of a) {
        assert.equal(r.headers['openai-organization'], 'org-one');
        assert.equal(r.headers['openai-project'], 'proj_shared');
      }
      const b = await chat(mock, 'sk-b1', 'gpt-mock');
      assert.equal(b.status, 200);
      assert.equal(b.headers['x-ratelimit-remaining-requests'], '2');
      assert.equal(b.headers['openai-organization'], 'org-two');
      assert.equal(b.headers['openai-project'], 'proj_other');
      // a key of no project is its own scope, named by its hash
      const lone = await chat(mock, 'sk-lone', 'gpt-mock');
      assert.equal(lone.status, 200);
      assert.equal(lone.headers['openai-organization'], 'org-mock');
      assert.match(lone.headers['openai-project'], /^[0-9a-f]{12}$/);
      const s = await mock.stats();
      assert.deepEqual(
        { requests: s.scopes.proj_shared.requests, passed: s.scopes.proj_shared.passed, rate_limited: s.scopes.proj_shared.rate_limited },
        { requests: 4, passed: 3, rate_limited: 1 });
      assert.equal(s.scopes.proj_shared.models['gpt-mock'].rate_limited, 1);
      assert.equal(s.scopes.proj_other.rate_limited, 0);
      assert.equal(s.scopes[lone.headers['openai-project']].requests, 1);
      assert.equal(Object.keys(s.keys).length, 4, 'keys stay counted per key');
    },
  },
  {
    name: 'projects with model_limits: budgets per (project, model); Anthropic identity headers on /v1/messages',
    fn: async (t) => {
      const mock = await t.startMock({
        config: {
          style: 'anthropic',
          model_limits: [{ models: ['claude-x'], rpm: 60, burst: 1 }, { models: ['claude-y'], rpm: 60, burst: 1 }],
          projects: [
            { id: 'wrk_a', organization: '11111111-2222-3333-4444-555555555555', workspace: 'wrkspc_a', keys: ['sk-ant-1', 'sk-ant-2'] },
            { id: 'wrk_b', keys: ['sk-ant-3'] },
          ],
        },
      });
      const body = (model) => JSON.stringify({ model, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
      const r = [
        await messages(mock, 'sk-ant-1', body('claude-x')),
        await messages(mock, 'sk-ant-2', body('claude-x')),
        await messages(mock, 'sk-ant-2', body('claude-y')),
        await messages(mock, 'sk-ant-3', body('claude-x')),
      ];
      assert.deepEqual(statuses(r), [200, 429, 200, 200]);
      assert.equal(r[1].json().error.type, 'rate_limit_error');
      assert.equal(r[0].headers['anthropic-organization-id'], '11111111-2222-3333-4444-555555555555');
      assert.equal(r[0].headers['anthropic-workspace-id'], 'wrkspc_a');
      assert.equal(r[1].headers['anthropic-organization-id'], '11111111-2222-3333-4444-555555555555', 'a 429 names the scope too');
      assert.equal(r[0].headers['openai-project'], undefined);
      assert.equal(r[3].headers['anthropic-organization-id'], 'org-mock');
      assert.equal(r[3].headers['anthropic-workspace-id'], undefined);
      assert.equal(r[0].headers['anthropic-ratelimit-requests-limit'], '60');
      const s = await mock.stats();
      assert.equal(s.scopes.wrk_a.models['claude-x'].rate_limited, 1);
      assert.equal(s.scopes.wrk_a.models['claude-y'].rate_limited, 0);
      assert.equal(s.scopes.wrk_b.models['claude-x'].passed, 1);
      assert.equal(s.models['claude-x'].requests, 3);
    },
  },
  {
    name: 'projects: OpenAI-Project and OpenAI-Organization pick the project a key bills; one it may not bill is a 401',
    fn: async (t) => {
      const mock = await t.startMock({
        config: {
          style: 'openai',
          rpm: 6,
          burst: 1,
          projects: [
            { id: 'proj_a', organization: 'org-a', keys: ['sk-multi', 'sk-a'] },
            { id: 'proj_b', organization: 'org-b', keys: ['sk-multi'] },
          ],
        },
      });
      const first = await chat(mock, 'sk-multi', 'gpt-mock');
      assert.equal(first.status, 200);
      assert.equal(first.headers['openai-project'], 'proj_a', 'without a header: the first project listing the key');
      assert.equal((await chat(mock, 'sk-a', 'gpt-mock')).status, 429, 'proj_a is spent');
      const b = await chat(mock, 'sk-multi', 'gpt-mock', { 'OpenAI-Project': 'proj_b' });
      assert.equal(b.status, 200, 'proj_b has its own budget');
      assert.equal(b.headers['openai-project'], 'proj_b');
      assert.equal(b.headers['openai-organization'], 'org-b');
      const again = await chat(mock, 'sk-multi', 'gpt-mock', { 'OpenAI-Organization': 'org-b' });
      assert.equal(again.status, 429, 'OpenAI-Organization alone picks proj_b, now spent');
      assert.equal(again.headers['openai-project'], 'proj_b');
      const bad = await chat(mock, 'sk-a', 'gpt-mock', { 'OpenAI-Project': 'proj_b' });
      assert.equal(bad.status, 401);
      assert.equal(bad.json().error.code, 'mismatched_project');
      const badOrg = await chat(mock, 'sk-multi', 'gpt-mock', { 'OpenAI-Organization': 'org-z' });
      assert.equal(badOrg.status, 401);
      assert.equal(badOrg.json().error.code, 'mismatched_organization');
      const s = await mock.stats();
      assert.equal(s.scopes.proj_a.rate_limited, 1);
      assert.equal(s.scopes.proj_b.passed, 1);
      assert.equal(s.scopes.proj_b.rate_limited, 1);
      assert.equal(s.responses['401'], 2);
    },
  },
  {
    name: 'Azure deployments path: the deployment is the model of the budget',
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', model_limits: [{ models: ['dep-1'], rpm: 60, burst: 1 }] } });
      const az = (dep) => request(`${mock.url}/openai/deployments/${dep}/chat/completions?api-version=2024-10-21`, {
        method: 'POST', headers: { 'api-key': 'az-key', 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      });
      const r = [await az('dep-1'), await az('dep-1'), await az('dep-2')];
      assert.deepEqual(statuses(r), [200, 429, 200]);
      assert.equal(r[0].json().model, 'dep-1');
      assert.equal(r[0].json().object, 'chat.completion');
      const s = await mock.stats();
      assert.equal(s.models['dep-1'].rate_limited, 1);
      assert.ok(s.keys[Object.keys(s.keys)[0]].requests === 3, 'api-key names the key');
    },
  },
  {
    name: 'cache: first request writes the prefix (cache_creation_input_tokens), the next reads it, in answers and in streams',
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'anthropic' } });
      const prefix = 'p'.repeat(8000); // 2000 tokens
      const question = 'q'.repeat(400); // 100 tokens
      const one = await messages(mock, 'sk-c', messagesBody('claude-c', prefix, question));
      assert.equal(one.status, 200);
      assert.deepEqual(one.json().usage, { input_tokens: 100, cache_creation_input_tokens: 2000, cache_read_input_tokens: 0, output_tokens: 5 });
      const two = await messages(mock, 'sk-c', messagesBody('claude-c', prefix, 'other question, same prefix'));
      assert.deepEqual(two.json().usage, { input_tokens: 6, cache_creation_input_tokens: 0, cache_read_input_tokens: 2000, output_tokens: 5 });
      // another model, or another key (scope), has a cache of its own
      const otherModel = await messages(mock, 'sk-c', messagesBody('claude-d', prefix, question));
      assert.equal(otherModel.json().usage.cache_creation_input_tokens, 2000);
      const otherKey = await messages(mock, 'sk-c2', messagesBody('claude-c', prefix, question));
      assert.equal(otherKey.json().usage.cache_creation_input_tokens, 2000);
      // the stream's message_start carries the same usage
      const st = await streamRequest(`${mock.url}/v1/messages`, {
        headers: { 'x-api-key': 'sk-c', 'content-type': 'application/json' },
        body: messagesBody('claude-c', prefix, question, { stream: true }),
      });
      const text = (await st.done).toString();
      const start = JSON.parse(/event: message_start\ndata: (.*)\n/.exec(text)[1]);
      assert.deepEqual(start.message.usage, { input_tokens: 100, cache_creation_input_tokens: 0, cache_read_input_tokens: 2000, output_tokens: 1 });
      // a request without cache_control keeps the plain usage
      const plain = await messages(mock, 'sk-c', JSON.stringify({ model: 'claude-c', max_tokens: 10, system: prefix, messages: [{ role: 'user', content: question }] }));
      assert.deepEqual(plain.json().usage, { input_tokens: 2100, output_tokens: 5 });
      // the prefix ends at the last cache_control block: a block after it is not cached
      const body = JSON.stringify({
        model: 'claude-c', max_tokens: 10,
        system: [{ type: 'text', text: prefix, cache_control: { type: 'ephemeral' } }],
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'a'.repeat(400), cache_control: { type: 'ephemeral' } }] },
          { role: 'assistant', content: 'b'.repeat(400) },
          { role: 'user', content: [{ type: 'text', text: 'c'.repeat(400) }] },
        ],
      });
      const longer = await messages(mock, 'sk-c', body);
      assert.deepEqual(longer.json().usage, { input_tokens: 200, cache_creation_input_tokens: 2100, cache_read_input_tokens: 0, output_tokens: 5 });
      assert.equal((await messages(mock, 'sk-c', body)).json().usage.cache_read_input_tokens, 2100);
      const s = await mock.stats();
      assert.equal(s.cache_creations, 4);
      assert.equal(s.cache_reads, 3);
      assert.equal(s.models['claude-c'].cache_reads, 3);
      assert.equal(s.models['claude-d'].cache_creations, 1);
    },
  },
  {
    name: 'cache: reads do not consume the input-token bucket; a request that does not fit is a 429 with input-tokens headers',
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'anthropic', model_limits: [{ models: ['claude-c'], itpm: 3000 }] } });
      const prefix = 'p'.repeat(8000); // 2000 tokens
      let sentAt = Date.now();
      const first = await messages(mock, 'sk-c', messagesBody('claude-c', prefix, 'q'.repeat(400)));
      assert.equal(first.status, 200);
      assert.equal(first.headers['anthropic-ratelimit-input-tokens-limit'], '3000');
      const after1 = inputRemaining(first);
      assert.ok(after1 >= 900 && after1 <= 901, `2100 charged of 3000: ${after1} left`);
      // 8 reads of the 2000-token prefix: 16 000 tokens read, 100 each charged. Between
      // two readings the bucket refills 50 a second: one token in 20 ms, more when the
      // machine is busy (900 -> 802 once, beside other tests): at most what the time
      // from the previous request's send to this answer refills.
      let last = after1;
      for (let i = 0; i < 8; i++) {
        const sent = Date.now();
        const r = await messages(mock, 'sk-c', messagesBody('claude-c', prefix, 'q'.repeat(400)));
        const refill = Math.ceil((Date.now() - sentAt) * 3000 / 60000);
        sentAt = sent;
        assert.equal(r.status, 200, r.text());
        assert.equal(r.json().usage.cache_read_input_tokens, 2000);
        const rem = inputRemaining(r);
        assert.ok(rem <= last - 100 + Math.max(1, refill) && rem >= last - 101, `a read charges 100: ${last} -> ${rem} (refilled at most ${refill} since)`);
        last = rem;
      }
      // 2000 new prefix tokens do not fit in what is left: refused, and not cached
      const miss = await messages(mock, 'sk-c', messagesBody('claude-c', 'n'.repeat(8000), 'q'.repeat(400)));
      assert.equal(miss.status, 429);
      const e = miss.json();
      assert.equal(e.type, 'error');
      assert.equal(e.error.type, 'rate_limit_error');
      assert.match(e.error.message, /input tokens per minute/);
      const wait = Number(miss.headers['retry-after']);
      // 2100 needed, ~100 left, 50 per second: about 40 s
      assert.ok(wait >= 35 && wait <= 42, `retry-after ${wait}`);
      assert.equal(miss.headers['anthropic-ratelimit-input-tokens-limit'], '3000');
      assert.ok(inputRemaining(miss) < 2100);
      const reset = Date.parse(miss.headers['anthropic-ratelimit-input-tokens-reset']);
      assert.match(miss.headers['anthropic-ratelimit-input-tokens-reset'], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.ok(reset > Date.now() + 30000 && reset < Date.now() + 70000, `reset ${miss.headers['anthropic-ratelimit-input-tokens-reset']}`);
      // a request too large for the bucket at all: refused without retry-after
      const huge = await messages(mock, 'sk-c', messagesBody('claude-c', 'h'.repeat(16000), 'q'));
      assert.equal(huge.status, 429);
      assert.equal(huge.headers['retry-after'], undefined);
      const s = await mock.stats();
      // tokens: what the 9 passed requests charged (cache reads never)
      assert.deepEqual(s.models['claude-c'], { requests: 11, passed: 9, rate_limited: 2, cache_reads: 8, cache_creations: 1, tokens: 2990 });
    },
  },
  {
    name: 'cache: a read refreshes the TTL; after cache_ttl_ms without a read the prefix is written and charged in full again',
    timeout_ms: 20000,
    fn: async (t) => {
      const ttl = 1000 * t.slow;
      const mock = await t.startMock({ config: { style: 'anthropic', cache_ttl_ms: ttl, model_limits: [{ models: ['claude-c'], itpm: 60000 }] } });
      const prefix = 'p'.repeat(8000);
      const send = () => messages(mock, 'sk-c', messagesBody('claude-c', prefix, 'q'.repeat(400)));
      const u = async () => { const r = await send(); assert.equal(r.status, 200); return { usage: r.json().usage, rem: inputRemaining(r) }; };
      assert.equal((await u()).usage.cache_creation_input_tokens, 2000);
      await sleep(ttl * 0.6);
      assert.equal((await u()).usage.cache_read_input_tokens, 2000);
      await sleep(ttl * 0.6); // past the first write's TTL, within the read's
      const r3 = await u();
      assert.equal(r3.usage.cache_read_input_tokens, 2000, 'the read refreshed the entry');
      await sleep(ttl * 1.5);
      const r4 = await u();
      assert.deepEqual(r4.usage, { input_tokens: 100, cache_creation_input_tokens: 2000, cache_read_input_tokens: 0, output_tokens: 5 });
      // charged in full: the bucket (60000, refilling 1000/s) lost 2100 minus the refill since r3
      assert.ok(r4.rem <= 60000 - 2100 + 10, `after the expiry ${r4.rem} left`);
      const s = await mock.stats();
      assert.equal(s.cache_creations, 2);
      assert.equal(s.cache_reads, 2);
    },
  },
  {
    name: 'config: the new fields reject unknown or malformed entries with 400 and keep the old behaviour',
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'openai', model_limits: [{ models: ['m'], rpm: 60, burst: 1 }] } });
      const bad = [
        { model_limits: [{ models: ['a'], rps: 2 }] },
        { model_limits: [{ rpm: 2 }] },
        { model_limits: [{ models: ['a'] }, { models: ['a'] }] },
        { model_limits: {} },
        { projects: [{ keys: ['k'] }] },
        { projects: [{ id: 'p', keys: 'k' }] },
        { projects: [{ id: 'p', keys: ['k'], budget: 1 }] },
        { projects: [{ id: 'p', keys: [] }, { id: 'p', keys: [] }] },
        { projects: [{ id: 'p x', keys: [] }] },
        { cache_ttl_ms: 0 },
        { cache_ttl_ms: 'soon' },
      ];
      for (const cfg of bad) {
        const r = await request(`${mock.url}/_mock/config`, { method: 'POST', body: JSON.stringify(cfg) });
        assert.equal(r.status, 400, `${JSON.stringify(cfg)} was accepted`);
        assert.equal(r.json().ok, false);
      }
      assert.deepEqual(statuses([await chat(mock, 'k', 'm'), await chat(mock, 'k', 'm')]), [200, 429], 'the old config still holds');
      // plain configs: no identity headers, no per-model headers, stats keep their old fields
      await mock.configure({});
      const r = await chat(mock, 'k', 'm');
      assert.equal(r.headers['openai-project'], undefined);
      assert.equal(r.headers['x-ratelimit-limit-requests'], undefined);
      const s = await mock.stats();
      for (const f of ['requests', 'in_flight', 'responses', 'rate_limited', 'window_violations', 'keys']) assert.ok(f in s, f);
      await mock.reset();
      const z = await mock.stats();
      assert.deepEqual(z.models, {});
      assert.equal(z.cache_reads, 0);
    },
  },
];
