// Renders deterministic conversations with @huggingface/jinja through every template in
// tests/data/templates (Gemma 4 revisions) as the reference for lockstep's Jinja interpreter.
// Usage: node gen_chat_ref.js OUT_DIR
//   -> OUT_DIR/chat_<template>.json {template, cases: [{input, expected} | {input, error}]}
//   -> OUT_DIR/jinja_snippets.json [{template, context, expected} | {..., error}]
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');
const { conversations } = require('./chat_conversations');
const { snippets } = require('./jinja_snippets');

const outDir = process.argv[2];
if (!outDir) throw new Error('usage: node gen_chat_ref.js OUT_DIR');
fs.mkdirSync(outDir, { recursive: true });
const templateDir = path.join(__dirname, '..', 'data', 'templates');

function renderOrError(source, context) {
  try {
    return { expected: new Template(source).render(JSON.parse(JSON.stringify(context))) };
  } catch (e) {
    return { error: String(e.message || e) };
  }
}

for (const file of fs.readdirSync(templateDir).filter((f) => f.endsWith('.jinja')).sort()) {
  const source = fs.readFileSync(path.join(templateDir, file), 'utf8');
  const cases = conversations().map((input) => ({ input, ...renderOrError(source, input) }));
  const name = file.replace(/\.jinja$/, '');
  fs.writeFileSync(path.join(outDir, `chat_${name}.json`),
    JSON.stringify({ template: source, cases }));
  const ok = cases.filter((c) => c.expected !== undefined).length;
  console.log(`chat reference ${name}: ${ok} of ${cases.length} conversations rendered`);
}

const rows = snippets.map(([template, context]) => ({ template, context,
  ...renderOrError(template, context) }));
fs.writeFileSync(path.join(outDir, 'jinja_snippets.json'), JSON.stringify(rows));
console.log(`jinja snippets: ${rows.length} (${rows.filter((r) => r.error).length} errors)`);
