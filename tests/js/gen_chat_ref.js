// Renders Gemma 4 conversations with @huggingface/jinja and gemma4.jinja (the template a Gemma 4
// GGUF carries; llama.cpp models/templates/gemma4.jinja) as lockstep's chat-template reference.
// Usage: node gen_chat_ref.js OUT_DIR   -> OUT_DIR/chat_cases.json [{input, expected}]
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');

const outDir = process.argv[2];
if (!outDir) throw new Error('usage: node gen_chat_ref.js OUT_DIR');
fs.mkdirSync(outDir, { recursive: true });
const source = fs.readFileSync(path.join(__dirname, 'gemma4.jinja'), 'utf8');
const tmpl = new Template(source);

const weatherTool = { type: 'function', function: { name: 'get_weather',
  description: 'Get the current weather for a city.',
  parameters: { type: 'object', properties: {
    city: { type: 'string', description: 'City name, e.g. Tokyo' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Unit' },
    days: { type: 'integer', description: 'Forecast days', nullable: true } },
  required: ['city'] } } };
const searchTool = { type: 'function', function: { name: 'search', description: 'Search the web.',
  parameters: { type: 'object', properties: {
    query: { type: 'string' },
    filters: { type: 'object', description: 'Filters', properties: {
      site: { type: 'string', description: 'Domain' }, after: { type: 'string' } },
      required: ['site'] },
    tags: { type: 'array', description: 'Tags', items: { type: 'string' } },
    points: { type: 'array', items: { type: 'object', properties: { x: { type: 'number' },
      y: { type: 'number' } }, required: ['x'] } } },
  required: ['query', 'tags'] },
  response: { description: 'Search results', type: 'object' } } };
const noParamTool = { type: 'function', function: { name: 'now', description: 'Current time.' } };

const U = (c) => ({ role: 'user', content: c });
const A = (c) => ({ role: 'assistant', content: c });
const S = (c) => ({ role: 'system', content: c });
const call = (name, args) => ({ role: 'assistant', tool_calls: [{ type: 'function',
  function: { name, arguments: args } }] });
const resp = (name, response) => ({ role: 'tool', tool_responses: [{ name, response }] });

const convs = [
  { messages: [U('Hello!')] },
  { messages: [U('Hello!')], add_generation_prompt: false },
  { messages: [U('  padded user text \n\n')] },
  { messages: [S('You are helpful.'), U('Hi')] },
  { messages: [S('  trimmed system  \n'), U('Hi'), A('Hello! How can I help?'), U('Tell me a joke.')] },
  { messages: [{ role: 'developer', content: 'Developer rules.' }, U('Go')] },
  { messages: [U('Hi')], enable_thinking: true },
  { messages: [U('Hi')], enable_thinking: false },
  { messages: [S('Sys'), U('Hi')], enable_thinking: true },
  { messages: [U('Q'), A('<|channel>thought\nlet me think<channel|>The answer is 4.'), U('Why?')] },
  { messages: [U('Q'), A('Before <|channel>hidden<channel|> middle <|channel>x<channel|> after  ')] },
  { messages: [U('Q'), A('no close <|channel>dangling')] },
  { messages: [U('Weather in Tokyo?')], tools: [weatherTool] },
  { messages: [S('Use tools.'), U('Weather?')], tools: [weatherTool, searchTool] },
  { messages: [U('time?')], tools: [noParamTool] },
  { messages: [U('Search')], tools: [searchTool], enable_thinking: true },
  { messages: [U('Weather in Tokyo?'), call('get_weather', { city: 'Tokyo', unit: 'celsius' })], tools: [weatherTool] },
  { messages: [U('W?'), call('get_weather', { city: 'Tokyo' }), resp('get_weather', { temperature: 21, sky: 'clear' })], tools: [weatherTool] },
  { messages: [U('W?'), call('get_weather', { city: 'Tokyo' }), resp('get_weather', { temperature: 21 }), A('It is 21 degrees.')], tools: [weatherTool] },
  { messages: [U('W?'), call('get_weather', { city: 'Paris' }), resp('get_weather', 'sunny, 25C')] },
  { messages: [U('W?'), call('get_weather', '{"city": "Oslo"}')] },
  { messages: [U('W?'), call('search', { query: 'x', tags: ['a', 'b'], filters: { site: 'example.com', strict: true }, n: 3 })] },
  { messages: [U('W?'), call('f', { nested: { list: [1, 2.5, 'three', false, { k: 'v' }] } }), resp('f', { ok: true, items: [] })] },
  { messages: [U('W?'), { role: 'tool', tool_responses: [{ name: 'a', response: { x: 1 } }, { response: { y: 'z' } }] }] },
  { messages: [U('W?'), { role: 'assistant', content: 'Calling.', tool_calls: [{ function: { name: 'a', arguments: {} } }, { function: { name: 'b', arguments: { q: 'r' } } }] }] },
  { messages: [U('W?'), { role: 'tool', tool_responses: [{ name: 'a', response: 'r' }], content: 'extra text' }] },
  { messages: [{ role: 'user', content: [{ type: 'text', text: ' Describe ' }, { type: 'image' }, { type: 'text', text: 'this.' }] }] },
  { messages: [{ role: 'user', content: [{ type: 'audio' }, { type: 'text', text: 'Transcribe.' }, { type: 'video' }] }] },
  { messages: [U('a'), { role: 'assistant', content: [{ type: 'text', text: '<|channel>t<channel|>Part one.' }, { type: 'text', text: ' Part two ' }] }] },
  { messages: [U('你好，世界 🧬'), A('مرحبا\n\nשלום'), U('e\u0301\tend')] },
  { messages: [U('multi\nline\n\n\ninput'), A('  spaced  '), U('<|turn>literal<turn|>')] },
  { messages: [S(''), U('')] },
  { messages: [U('1'), A('2'), U('3'), A('4'), U('5'), A('6'), U('7')] },
  { messages: [U('x'), { role: 'custom_role', content: 'odd role' }] },
  { messages: [U('W?'), call('get_weather', { city: 'Tokyo' }), resp('get_weather', { t: 1 })], tools: [weatherTool], add_generation_prompt: true, enable_thinking: true },
  { messages: [U('x')], tools: [], enable_thinking: false, add_generation_prompt: false },
];

const rows = convs.map((c) => {
  const input = { messages: c.messages, bos_token: '<bos>',
    add_generation_prompt: c.add_generation_prompt ?? true };
  if (c.tools !== undefined) input.tools = c.tools;
  if (c.enable_thinking !== undefined) input.enable_thinking = c.enable_thinking;
  return { input, expected: tmpl.render(JSON.parse(JSON.stringify(input))) };
});
fs.writeFileSync(path.join(outDir, 'chat_cases.json'), JSON.stringify({ template: source, cases: rows }));
console.log(`chat reference: ${rows.length} conversations rendered`);
