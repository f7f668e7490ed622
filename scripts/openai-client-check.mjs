// The official OpenAI Node client, unchanged, against hedge-server: a chat completion not
// streamed and streamed (with usage), greedy; the two texts must match and the stream must
// end with a finish reason. Run by scripts/openai-client-check.sh, which installs `openai`
// from the npm registry and starts the server.
// usage: node openai-client-check.mjs BASE_URL OPENAI_PREFIX   (BASE_URL ends in /v1)
import { createRequire } from 'node:module';
import path from 'node:path';

const [baseURL, prefix] = process.argv.slice(2);
const require = createRequire(path.resolve(prefix, 'package.json'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const client = new OpenAI({ baseURL, apiKey: 'not-needed', timeout: 30000, maxRetries: 0 });
const request = {
  model: 'stories260K',
  messages: [{ role: 'user', content: 'Once upon a time' }],
  temperature: 0,
  max_tokens: 40,
};

const fail = (message) => {
  console.error(`FAIL: ${message}`);
  process.exit(1);
};

const whole = await client.chat.completions.create(request);
const text = whole.choices[0].message.content;
if (!text || whole.usage.completion_tokens !== 40) fail(`non-streamed: ${JSON.stringify(whole)}`);
console.log(`ok: non-streamed: ${JSON.stringify(text)}`);

const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
let streamed = '', finish = null, usage = null;
for await (const chunk of stream) {
  if (chunk.choices.length > 0) {
    streamed += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  if (chunk.usage) usage = chunk.usage;
}
if (streamed !== text) fail(`streamed text differs: ${JSON.stringify(streamed)}`);
if (finish !== 'length' || usage?.completion_tokens !== 40) fail(`stream end: finish ${finish}, usage ${JSON.stringify(usage)}`);
console.log('ok: streamed text equals the non-streamed one, finish_reason length, usage');

const models = await client.models.list();
if (models.data.length !== 1) fail(`models: ${JSON.stringify(models.data)}`);
try {
  await client.chat.completions.create({ ...request, n: 2 });
  fail('n = 2 was accepted');
} catch (e) {
  if (!(e instanceof OpenAI.BadRequestError) || e.param !== 'n') fail(`n = 2: ${e}`);
  console.log(`ok: n = 2 is a BadRequestError: ${e.message}`);
}
console.log('openai client check passed');
