// The official OpenAI Node client, unchanged, against hedge-server's gateway: the `hedge`
// controls go through `extra_body`, as with any OpenAI-compatible extension. Streamed and
// not, the client gets a complete answer and the `hedge` object says which tier wrote it.
// With EXPECTED_TIERS "tools", a request with tools instead: the gateway passes it to the
// cloud, and the client assembles the streamed tool call from its deltas.
// usage: node gateway_openai.mjs BASE_URL OPENAI_PREFIX EXPECTED_TIERS   (e.g. "cloud0,edge")
import { createRequire } from 'node:module';
import path from 'node:path';

const [baseURL, prefix, expected] = process.argv.slice(2);
const require = createRequire(path.resolve(prefix, 'package.json'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const client = new OpenAI({ baseURL, apiKey: 'not-needed', timeout: 60000, maxRetries: 0 });
const fail = (message) => {
  console.error(`FAIL: ${message}`);
  process.exit(1);
};
const request = {
  model: 'stories260K',
  messages: [{ role: 'user', content: 'Once upon a time' }],
  temperature: 0,
  max_tokens: 40,
  hedge: { mode: 'cloud' },
};

if (expected === 'tools') {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const calls = await client.chat.completions.create({ ...request, tools, stream: true });
  let args = '';
  let name = '';
  let finish = null;
  for await (const chunk of calls) {
    const call = chunk.choices[0]?.delta?.tool_calls?.[0];
    name += call?.function?.name ?? '';
    args += call?.function?.arguments ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  if (name !== 'get_weather' || args !== '{"city": "Paris"}' || finish !== 'tool_calls')
    fail(`tool call: ${JSON.stringify({ name, args, finish })}`);
  console.log(`ok: a streamed tool call through the gateway: ${name}(${args})`);
  process.exit(0);
}

const stream = await client.chat.completions.create({ ...request, stream: true });
let text = '';
let finish = null;
let hedge = null;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? '';
  finish = chunk.choices[0]?.finish_reason ?? finish;
  hedge = chunk.hedge ?? hedge;
}
const tiers = hedge?.spans?.map((s) => s.tier).join(',');
if (!text || !finish || tiers !== expected) fail(`streamed: ${JSON.stringify({ text, finish, hedge })}`);
console.log(`ok: streamed (${tiers}): ${JSON.stringify(text)}`);
