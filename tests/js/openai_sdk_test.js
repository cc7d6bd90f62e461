// The official `openai` npm SDK against a running `lockstep serve`: completions, chat,
// streaming (with the usage chunk), logprobs and a 400 error come back as the SDK expects.
// Usage: node openai_sdk_test.js BASE_URL (e.g. http://127.0.0.1:8080/v1). Exits 0 when all pass.
'use strict';
const assert = require('assert');
const OpenAI = require('openai');

async function main() {
  const client = new OpenAI({baseURL: process.argv[2], apiKey: 'sdk-test-key', maxRetries: 0});
  let checks = 0;
  const check = (cond, what) => { assert.ok(cond, what); ++checks; };

  const models = await client.models.list();
  check(models.data.length === 1 && typeof models.data[0].id === 'string', 'models.list');
  const model = models.data[0].id;

  const base = {model, prompt: 'def fibonacci(n):', max_tokens: 12, temperature: 0};
  const whole = await client.completions.create(base);
  check(typeof whole.choices[0].text === 'string', 'completion text');
  check(whole.usage.completion_tokens >= 1 && whole.usage.completion_tokens <= 12, 'usage');
  check(['stop', 'length'].includes(whole.choices[0].finish_reason), 'finish_reason');

  let streamed = '';
  for await (const chunk of await client.completions.create({...base, stream: true}))
    for (const c of chunk.choices) streamed += c.text;
  check(streamed === whole.choices[0].text, 'streamed completion equals the whole one');

  const lp = await client.completions.create({...base, logprobs: 2});
  const n = lp.usage.completion_tokens;
  check(lp.choices[0].logprobs.token_logprobs.length === n, 'completion logprobs per token');
  check(lp.choices[0].text === whole.choices[0].text, 'logprobs change no token');

  const messages = [{role: 'user', content: 'Write a Python function that adds two numbers.'}];
  const chat = await client.chat.completions.create(
      {model, messages, max_tokens: 10, temperature: 0.7, seed: 3, logprobs: true, top_logprobs: 2});
  check(chat.choices[0].message.role === 'assistant', 'chat role');
  check(typeof chat.choices[0].message.content === 'string', 'chat content');
  const content = chat.choices[0].logprobs.content;
  check(content.length === chat.usage.completion_tokens, 'chat logprobs per token');
  check(content.every(t => t.top_logprobs.length === 2 && t.logprob <= 0), 'chat top_logprobs');

  let chatStreamed = '', usage = null, sawDone = false;
  const stream = await client.chat.completions.create({model, messages, max_tokens: 10,
      temperature: 0.7, seed: 3, stream: true, stream_options: {include_usage: true}});
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      chatStreamed += c.delta.content || '';
      if (c.finish_reason) sawDone = true;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  check(chatStreamed === chat.choices[0].message.content, 'streamed chat equals the whole one');
  check(sawDone && usage && usage.completion_tokens === chat.usage.completion_tokens,
        'stream usage chunk');

  try {
    await client.completions.create({...base, max_tokens: 1 << 20});
    check(false, 'an impossible max_tokens must fail');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400, 'BadRequestError 400');
  }
  console.log(`openai SDK: ${checks} checks passed`);
}

main().catch(e => {
  console.error('openai SDK test failed:', e);
  process.exit(1);
});
