// Deterministic chat conversations for the chat-template reference: hand-written edge cases and
// seeded random mixes of system prompts, turns, thinking, tools, tool calls/responses and media.
'use strict';

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
const tools = [weatherTool, searchTool, noParamTool];

const U = (c) => ({ role: 'user', content: c });
const A = (c) => ({ role: 'assistant', content: c });
const S = (c) => ({ role: 'system', content: c });
const call = (name, args) => ({ role: 'assistant', tool_calls: [{ type: 'function',
  function: { name, arguments: args } }] });
const resp = (name, response) => ({ role: 'tool', tool_responses: [{ name, response }] });
// OpenAI Chat Completions style: calls with ids, answered by role:tool messages.
const oaCall = (id, name, args, extra = {}) => ({ role: 'assistant', ...extra,
  tool_calls: [{ id, type: 'function', function: { name, arguments: args } }] });
const oaTool = (id, content, name) => ({ role: 'tool', tool_call_id: id, content,
  ...(name ? { name } : {}) });

const handwritten = [
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
  // OpenAI-style tool flows (the 31B revision scans the role:tool messages after a call).
  { messages: [U('W?'), oaCall('c1', 'get_weather', { city: 'Rome' }), oaTool('c1', '{"t": 30}')], tools: [weatherTool] },
  { messages: [U('W?'), oaCall('c1', 'get_weather', { city: 'Rome' }), oaTool('c1', [{ type: 'text', text: 'part A ' }, { type: 'text', text: 'part B' }]), A('Hot.')], tools: [weatherTool] },
  { messages: [U('W?'), oaCall('c9', 'now', {}), oaTool('zz', 'noon', 'now')] },
  { messages: [U('W?'), oaCall('c1', 'get_weather', { city: 'Rome' }, { reasoning_content: 'Need the weather.' }), oaTool('c1', 'sunny')], enable_thinking: true },
  { messages: [U('W?'), oaCall('c1', 'get_weather', { city: 'Rome' }, { reasoning: 'Think first.' })], add_generation_prompt: true },
  { messages: [U('Q'), A('First part.'), A('Second part.')] },
  { messages: [U('W?'), oaCall('c1', 'now', {}), oaTool('c1', { hour: 12 }), oaCall('c2', 'now', {}), oaTool('c2', 'late')], add_generation_prompt: false },
];

// mulberry32: a small seeded generator, so the random mixes are the same on every machine.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const texts = ['Hi', 'What is 2+2?', '  leading and trailing  ', 'line one\nline two', 'Ünïcödé ✓',
  'emoji 🧪🧬', 'tabs\tinside', '', 'a "quoted" word', 'back\\slash', '<|channel>x<channel|>visible'];

function randomContent(r, role) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  if (role !== 'user' || r() < 0.7) return pick(texts);
  const parts = [];
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; ++i) {
    const kind = pick(['text', 'text', 'image', 'audio', 'video']);
    parts.push(kind === 'text' ? { type: 'text', text: pick(texts) } : { type: kind });
  }
  return parts;
}

function randomConversation(r) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const messages = [];
  if (r() < 0.4) messages.push({ role: pick(['system', 'developer']), content: pick(texts) });
  const turns = 1 + Math.floor(r() * 4);
  for (let t = 0; t < turns; ++t) {
    messages.push({ role: 'user', content: randomContent(r, 'user') });
    const last = t === turns - 1;
    if (last && r() < 0.5) break;
    if (r() < 0.3) {
      const city = pick(['Oslo', 'Lima', 'Kyiv']);
      messages.push(call('get_weather', { city, days: Math.floor(r() * 5) }));
      if (r() < 0.8) messages.push(resp('get_weather', r() < 0.5 ? { temp: 20.5, ok: true } : 'rain'));
    }
    if (!last || r() < 0.5) messages.push({ role: 'assistant', content: randomContent(r, 'assistant') });
  }
  const conv = { messages, add_generation_prompt: r() < 0.7 };
  if (r() < 0.5) conv.enable_thinking = r() < 0.6;
  if (r() < 0.4) conv.tools = tools.slice(0, 1 + Math.floor(r() * 3));
  return conv;
}

function conversations() {
  const r = rng(20240614);
  const all = handwritten.concat(Array.from({ length: 40 }, () => randomConversation(r)));
  return all.map((c) => {
    const input = { messages: c.messages, bos_token: '<bos>',
      add_generation_prompt: c.add_generation_prompt ?? true };
    if (c.tools !== undefined) input.tools = c.tools;
    if (c.enable_thinking !== undefined) input.enable_thinking = c.enable_thinking;
    return input;
  });
}

module.exports = { conversations };
