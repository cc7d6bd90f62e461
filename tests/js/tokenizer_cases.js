// Deterministic test strings (as byte Buffers) for the tokenizer reference comparison.
'use strict';

function rng(seed) {  // mulberry32: a fixed sequence on every machine
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CODE = [
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  'class Foo:\n\tdef __init__(self, x: int) -> None:\n\t\tself.x = x  # store\n',
  '#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return 0;\n}\n',
  'template <typename T>\nconstexpr T max(T a, T b) noexcept { return a > b ? a : b; }',
  'const f = async (url) => {\n  const r = await fetch(url);\n  return r.json();\n};\n',
  'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
  'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello, 世界")\n}\n',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;',
  '<!DOCTYPE html>\n<html><head><title>Test</title></head>\n<body><table><tr><td>1</td></tr></table></body></html>',
  '#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  echo "$f" | tr a-z A-Z\ndone\n',
  '{"name": "lockstep", "version": "0.1.0", "tags": ["a", "b"], "n": 3.14e-10, "ok": true}',
  'public static void main(String[] args) {\n    System.out.println("Hi");\n}',
  'local t = {1, 2, 3}\nfor i, v in ipairs(t) do print(i, v) end',
  '\\begin{equation}\n  E = mc^2 \\quad \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}\n\\end{equation}',
  'x <- c(1, 2, 3)\nmean(x) |> print()',
  '    indented with four\n\t\ttabs\n        eight spaces\r\nwindows line\r\n',
];
const WORDS = ['the', 'quick', 'brown', 'fox', 'Hello', 'world', 'lockstep', 'tokenizer', 'GGUF',
  'llama.cpp', 'Gemma', '1234567', '3.14159', 'don\'t', 'e-mail', 'naïve', 'café', 'Straße',
  'Привет', 'мир', 'Ελληνικά', 'ქართული', 'हिन्दी', 'தமிழ்', 'ไทย', 'Tiếng Việt'];
const EMOJI = ['😀', '🧬', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇯🇵', '🇺🇸', '❤️', '🤖', '✨', '🫠', '🧑🏿‍💻', '1️⃣', '🐈‍⬛'];
const CJK = ['你好，世界', '東京都渋谷区', 'ひらがなとカタカナ', '한국어 텍스트', '中文分词测试：这是一个句子。',
  '漢字仮名交じり文', '𠀀𠀁𪚥', '（全角括号）「引用」', '龘靐齉'];
const RTL = ['مرحبا بالعالم', 'العربية: النص من اليمين إلى اليسار', 'שלום עולם', 'עִבְרִית עם ניקוד',
  'فارسی: سلام', 'اردو زبان', '\u202Eabc\u202C', 'mixed English و عربي text', 'ܐܪܡܝܐ'];
const MARKS = ['e\u0301', 'a\u0308\u0304', 'Z\u0351\u036B\u0343\u036A\u0302\u036B\u033D\u034F\u0334',
  'n\u0303o\u0302', 'क्षत्रिय', 'ภาษาไทย', '\u0BA4\u0BAE\u0BBF\u0BB4\u0BCD', 'ḁ̴̢̛̯͖̀', 'ゔ', 'o\u0338',
  '\u1100\u1161\u11A8'];

function pick(r, arr) { return arr[Math.floor(r() * arr.length)]; }
function int(r, lo, hi) { return lo + Math.floor(r() * (hi - lo + 1)); }

function soup(r, pools, n) {
  let s = '';
  for (let i = 0; i < n; ++i) {
    const p = pick(r, pools);
    s += pick(r, p);
    if (r() < 0.5) s += pick(r, [' ', '  ', '\n', '', ', ', '. ', '\t']);
  }
  return s;
}

function make(specialTexts, addedTexts) {
  const r = rng(20240611);
  const out = [];
  const add = (cat, x) => out.push({ cat, bytes: Buffer.isBuffer(x) ? x : Buffer.from(x, 'utf8') });
  // Code: whole snippets, random slices and re-indentations.
  for (const c of CODE) add('code', c);
  for (let i = 0; i < 380; ++i) {
    const c = pick(r, CODE);
    const a = int(r, 0, c.length - 1), b = int(r, a + 1, c.length);
    let s = c.slice(a, b);
    if (r() < 0.3) s = s.replace(/\n/g, '\n' + ' '.repeat(int(r, 1, 12)));
    if (r() < 0.2) s = s.replace(/ {4}/g, '\t');
    add('code', s);
  }
  // Whitespace and newline runs, including runs far longer than 31.
  for (let k = 1; k <= 80; ++k) add('ws', '\n'.repeat(k));
  for (let k = 1; k <= 70; ++k) add('ws', ' '.repeat(k));
  for (let k = 1; k <= 40; ++k) add('ws', '\t'.repeat(k));
  for (let k = 1; k <= 40; ++k) add('ws', 'x' + '\n'.repeat(k + 25) + 'y');
  for (let i = 0; i < 240; ++i) {
    let s = '';
    const n = int(r, 1, 8);
    for (let j = 0; j < n; ++j) {
      const ch = pick(r, [' ', '\n', '\t', '\r', '\r\n', '\u00a0', '\u3000', '\v', '\f']);
      s += ch.repeat(int(r, 1, r() < 0.2 ? 70 : 6));
      if (r() < 0.6) s += pick(r, WORDS);
    }
    add('ws', s);
  }
  for (let i = 0; i < 150; ++i) add('emoji', soup(r, [EMOJI, EMOJI, WORDS], int(r, 1, 10)));
  for (let i = 0; i < 150; ++i) add('cjk', soup(r, [CJK, CJK, WORDS], int(r, 1, 8)));
  for (let i = 0; i < 150; ++i) add('rtl', soup(r, [RTL, RTL, WORDS], int(r, 1, 8)));
  for (let i = 0; i < 150; ++i) add('marks', soup(r, [MARKS, MARKS, WORDS], int(r, 1, 8)));
  // Invalid UTF-8: stray continuation bytes, truncated sequences, overlongs, surrogates, 0xFF.
  const BAD = [[0x80], [0xBF], [0xC0, 0xAF], [0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80],
    [0xF0, 0x9F, 0x98], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xFE], [0xF4, 0x90, 0x80, 0x80],
    [0xE0, 0x80, 0x80], [0xC2]];
  for (let i = 0; i < 200; ++i) {
    const parts = [];
    const n = int(r, 1, 6);
    for (let j = 0; j < n; ++j) {
      if (r() < 0.5) parts.push(Buffer.from(BAD[int(r, 0, BAD.length - 1)]));
      else if (r() < 0.3) parts.push(Buffer.from(Array.from({ length: int(r, 1, 5) }, () => int(r, 0, 255))));
      else parts.push(Buffer.from(soup(r, [WORDS, EMOJI, CJK], int(r, 1, 3)), 'utf8'));
    }
    add('invalid', Buffer.concat(parts));
  }
  // Around every special token, and literal non-special added-token text (`<table>`, ...).
  const ctx = ['', ' ', '\n', 'x', 'Hello', ' world ', '\n\n', '<', '>', '|', '<|', '|>'];
  for (const t of specialTexts) {
    for (let i = 0; i < 14; ++i) add('special', pick(r, ctx) + t + pick(r, ctx) + (r() < 0.3 ? t : ''));
    add('special', t.slice(0, -1));
    add('special', t + t + t);
  }
  for (let i = 0; i < 120; ++i) add('added', pick(r, WORDS) + ' ' + pick(r, addedTexts) + pick(r, ['', ' ', '\n', 'x']));
  for (let i = 0; i < 100; ++i) {
    let s = '';
    for (let j = int(r, 1, 6); j > 0; --j) s += pick(r, specialTexts) + soup(r, [WORDS, CJK, EMOJI], int(r, 0, 3));
    add('special', s);
  }
  // Mixed text and a few long single lines (the splitter must not degrade without newlines).
  for (let i = 0; i < 200; ++i) add('mixed', soup(r, [WORDS, EMOJI, CJK, RTL, MARKS, ['1', '22', '333', '4.5', '-', '%', '$', '€']], int(r, 1, 25)));
  for (let i = 0; i < 4; ++i) add('long', soup(r, [WORDS, CJK, EMOJI], 2500).replace(/\n/g, ' '));
  add('empty', '');
  return out;
}

module.exports = { make };
