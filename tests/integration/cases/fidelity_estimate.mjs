// SPDX-License-Identifier: Apache-2.0
// What a request is charged (issue 28, items 1 and 5), seen from outside through
// /metrics' pacerd_tokens_estimated_total (each request adds the input and output it
// was charged at dispatch): a Responses API turn counts its instructions, every input
// item kind and its tool schemas; a request naming previous_response_id is charged the
// history the provider holds, learned from the previous answer's usage; Anthropic's
// cache reads lower the charge of a warm prompt, except on Claude Haiku 3.5, where
// they count. The Responses answers here are pacerd-mock's /echo (the request body
// back, its "usage" member the answer's usage): what is asserted is the charge, not
// the Responses API's events.
import assert from 'node:assert/strict';
import { request } from '../lib.mjs';
import { send, startPacerdWithAdmin } from '../load.mjs';

const key = 'sk-estimate-0001';
const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

/** The value of pacerd_tokens_estimated_total for a provider. */
async function estimated(p, provider) {
  const text = (await request(`${p.admin}/metrics`)).body.toString();
  const m = text.match(new RegExp(`^pacerd_tokens_estimated_total\\{provider="${provider}"\\} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : 0;
}

/** One call; what it added to the estimate counter. */
async function charged(p, provider, url, headers, body) {
  const before = await estimated(p, provider);
  const r = await send(url, { headers, body: JSON.stringify(body), timeout_ms: 10000 });
  assert.equal(r.status, 200, `${r.status} ${r.body?.slice(0, 300)}`);
  return (await estimated(p, provider)) - before;
}

const metered = (mock) => ({
  plans: { metered: { max_tokens_per_minute: 100000000 } },
  providers: { openai: { upstream: mock.url, plan: 'metered' }, anthropic: { upstream: mock.url, plan: 'metered' } },
});

// A Codex-style turn. Characters, counted by hand: instructions 24 × 100 = 2400; the
// user's message 21; function_call name "shell" 5 + arguments {"cmd":["ls","-la"]} 20;
// its output "a.c\nb.c\n" × 50 = 400; a reasoning item's summary "Listing files." 14 +
// 3/4 of its 400 base64 characters, 300; custom_tool_call name "apply_patch" 11 + input
// 29. 3200 characters: 800 tokens.
const TOOLS = [{
  type: 'function', name: 'shell', description: 'Runs a command',
  parameters: { type: 'object', properties: { cmd: { type: 'array', items: { type: 'string' } } }, required: ['cmd'], additionalProperties: false },
  strict: true,
}];
const INSTRUCTIONS = 'You are a coding agent. '.repeat(100);
const ITEMS = [
  { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Fix the failing test.' }] },
  { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: JSON.stringify({ cmd: ['ls', '-la'] }) },
  { type: 'function_call_output', call_id: 'call_1', output: 'a.c\nb.c\n'.repeat(50) },
  { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Listing files.' }], encrypted_content: 'QUJD'.repeat(100) },
  { type: 'custom_tool_call', call_id: 'call_2', name: 'apply_patch', input: '*** Begin Patch\n*** End Patch' },
];
// The tool schemas by the characters of their compact JSON text (no numbers in them:
// JSON.stringify's length is that count), / 4 rounded up.
const TOOLS_TOKENS = Math.ceil(JSON.stringify(TOOLS).length / 4);

export const tests = [
  {
    name: 'a Responses API turn with tools is charged its instructions, every item kind and the tool schemas (hand-counted), and its max_output_tokens',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, metered(mock));
      const body = { model: 'gpt-5-codex', instructions: INSTRUCTIONS, input: ITEMS, tools: TOOLS, max_output_tokens: 200, store: false };
      const got = await charged(p, 'openai', `${p.url}/echo/v1/responses`, auth, body);
      console.log(`#   Responses turn: charged ${got} = 800 text + ${TOOLS_TOKENS} tools + 200 output (the text and message parts alone: 606 + 200)`);
      assert.equal(got, 800 + TOOLS_TOKENS + 200);
      // the same tools in a chat completion, legacy functions, Anthropic's and Gemini's shapes
      const chat = { model: 'gpt-4o', max_tokens: 10, messages: [{ role: 'user', content: 'abcd' }], tools: [{ type: 'function', function: { name: 'shell', parameters: TOOLS[0].parameters } }] };
      const chatTools = Math.ceil(JSON.stringify(chat.tools).length / 4);
      assert.equal(await charged(p, 'openai', `${p.url}/echo/v1/chat/completions`, auth, chat), 1 + chatTools + 10);
      const legacy = { ...chat, tools: undefined, functions: [{ name: 'shell', parameters: TOOLS[0].parameters }] };
      assert.equal(await charged(p, 'openai', `${p.url}/echo/v1/chat/completions`, auth, legacy),
        1 + Math.ceil(JSON.stringify(legacy.functions).length / 4) + 10);
      const gemini = { contents: [{ parts: [{ text: 'abcd' }] }], tools: [{ functionDeclarations: [{ name: 'shell', parameters: TOOLS[0].parameters }] }], generationConfig: { maxOutputTokens: 10 } };
      assert.equal(await charged(p, 'openai', `${p.url}/echo/v1beta/models/g:generateContent`, auth, gemini),
        1 + Math.ceil(JSON.stringify(gemini.tools).length / 4) + 10);
    },
  },
  {
    name: 'a request naming previous_response_id is charged its estimate plus the history the previous answer showed (input − its estimate + its items + its output); one without is charged its estimate alone',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, metered(mock));
      const url = `${p.url}/echo/v1/responses`;
      const headers = { ...auth, 'x-agent-id': 'codex-1' };
      const turn1 = { model: 'gpt-5-codex', instructions: INSTRUCTIONS, input: ITEMS, tools: TOOLS, max_output_tokens: 200 };
      // 800 + tools tokens sent, the items 200 of them (800 − the instructions' 600);
      // the provider says it counted 20,000 input tokens and produced 500
      const est1 = 800 + TOOLS_TOKENS;
      assert.equal(await charged(p, 'openai', url, headers, { ...turn1, usage: { input_tokens: 20000, output_tokens: 500, total_tokens: 20500 } }), est1 + 200);
      // turn 2 sends the instructions, the tools and one new item: "ok\n" × 100 = 300
      // characters, 75 tokens
      const newItems = [{ type: 'function_call_output', call_id: 'call_3', output: 'ok\n'.repeat(100) }];
      const est2 = 600 + 75 + TOOLS_TOKENS;
      const turn2 = { model: 'gpt-5-codex', previous_response_id: 'resp_1', instructions: INSTRUCTIONS, input: newItems, tools: TOOLS, max_output_tokens: 200 };
      const held = (20000 - est1) + 200 + 500;
      const got = await charged(p, 'openai', url, headers, { ...turn2, usage: { input_tokens: 21000, output_tokens: 100, total_tokens: 21100 } });
      console.log(`#   chained turn: charged ${got} = estimate ${est2} + held history ${held} + output 200 (without the history: ${est2 + 200})`);
      assert.equal(got, est2 + held + 200);
      // another agent's chained turn knows no history: its estimate alone
      const other = await charged(p, 'openai', url, { ...auth, 'x-agent-id': 'codex-2' }, turn2);
      assert.equal(other, est2 + 200);
      // the first agent without previous_response_id: its estimate alone
      const { previous_response_id: _, ...unchained } = turn2;
      assert.equal(await charged(p, 'openai', url, headers, unchained), est2 + 200);
    },
  },
  {
    name: 'anthropic cache reads: a warm 10,000-token prompt is charged about its question on claude-sonnet-4-5, in full on claude-3-5-haiku (whose reads count toward ITPM)',
    fn: async (t) => {
      const mock = await t.startMock({ config: { style: 'anthropic', cache_ttl_ms: 600000 } });
      const p = await startPacerdWithAdmin(t, mock, metered(mock));
      const system = 'You are a careful coding agent. '.repeat(1250); // 40,000 characters: 10,000 tokens
      const headers = { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', 'x-agent-id': 'cc' };
      const body = (model, i) => ({
        model, max_tokens: 16,
        system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral', ttl: '1h' } }],
        messages: [{ role: 'user', content: `Question ${i}: what does line ${i} do?`.padEnd(100, '.') }],
      });
      const url = `${p.url}/anthropic/v1/messages`;
      const warm = {};
      for (const model of ['claude-sonnet-4-5', 'claude-3-5-haiku-20241022']) {
        const cold = await charged(p, 'anthropic', url, headers, body(model, 1));
        warm[model] = await charged(p, 'anthropic', url, headers, body(model, 2));
        console.log(`#   ${model}: the cold call charged ${cold}, the warm one ${warm[model]}`);
        assert.equal(cold, 10025 + 16); // 40,100 characters; max_tokens before any answer
      }
      // sonnet: 2 % of the prompt (cost.h's COST_SHARE_MIN: the question is 25 of its
      // 10,025 tokens) and the lane's output (the mock's answers carry 5)
      assert.equal(warm['claude-sonnet-4-5'], 0.02 * 10025 + 5);
      // haiku 3.5: the whole prompt again, and its output
      assert.equal(warm['claude-3-5-haiku-20241022'], 10025 + 5);
      const st = await mock.stats();
      assert.equal(st.cache_reads, 2, JSON.stringify(st));
    },
  },
];
