// The page at `/`: chat with the model through /v1/chat/completions (or plain completion when
// the model has no chat template), streaming, with per-token logprobs on hover and each
// response's draft counts and timings.
#include "server/web_page.h"

namespace lockstep::server {

std::string_view WebPage() {
  return R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lockstep</title>
<style>
body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem}
#log .turn{white-space:pre-wrap;border-left:3px solid #ccc;padding:.3rem .6rem;margin:.5rem 0}
#log .user{border-color:#36c}#log .assistant{border-color:#3a3}
.tok{border-radius:2px}.tok:hover{outline:1px solid #888}
.accepted{text-decoration:underline 2px #2a2}.corrected{text-decoration:underline wavy #c33}
#stats{color:#555;font-size:.85rem}textarea{width:100%;height:5rem}
</style></head><body>
<h1>lockstep</h1>
<div id="model"></div>
<div id="log"></div>
<textarea id="input" placeholder="Message (Ctrl+Enter sends)"></textarea>
<div><label>mode <select id="mode"><option value="chat">chat</option>
<option value="completion">completion</option></select></label>
<label>temperature <input id="temp" type="number" value="0" step="0.1" min="0" max="2"></label>
<label>seed <input id="seed" type="number" value="0"></label>
<label>max tokens <input id="max" type="number" value="128" min="1"></label>
<button id="send">Send</button></div>
<div id="stats"></div>
<div id="legend">shade: token probability; <span class="accepted">underlined</span>: a draft the
target accepted; <span class="corrected">wavy</span>: the target's token where drafts were
rejected (hover for logprobs and counts)</div>
<script>
'use strict';
const log = document.getElementById('log');
const history = [];
function turn(role, text) {
  const d = document.createElement('div');
  d.className = 'turn ' + role;
  d.textContent = text;
  log.appendChild(d);
  return d;
}
function shade(logprob) {  // greener = more certain
  const p = Math.exp(logprob);
  return 'rgba(' + Math.round(255 * (1 - p)) + ',200,120,' + (0.15 + 0.5 * (1 - p)) + ')';
}
// Marks the tokens each verify round produced: accepted drafts, then the target's own token.
function markRounds(spans, rounds) {
  for (const [start, drafted, accepted] of rounds) {
    for (let i = start; i < start + accepted && i < spans.length; ++i)
      spans[i].classList.add('accepted');
    const own = spans[start + accepted];
    if (own && drafted > accepted) {
      own.classList.add('corrected');
      own.title += '\n' + (drafted - accepted) + ' draft(s) rejected here';
    }
  }
}
function addToken(box, text, lp) {
  const s = document.createElement('span');
  s.className = 'tok';
  s.textContent = text;
  if (lp) {
    s.style.background = shade(lp.logprob);
    s.title = 'logprob ' + lp.logprob.toFixed(3) + '\n' +
      (lp.top_logprobs || []).map(t => JSON.stringify(t.token) + ' ' + t.logprob.toFixed(3)).join('\n');
  }
  box.appendChild(s);
  return s;
}
async function send() {
  const input = document.getElementById('input');
  const text = input.value;
  if (!text) return;
  input.value = '';
  const chat = document.getElementById('mode').value === 'chat';
  turn('user', text);
  const box = turn('assistant', '');
  const common = {stream: true, draft_rounds: true,
                  temperature: +document.getElementById('temp').value,
                  seed: +document.getElementById('seed').value,
                  max_tokens: +document.getElementById('max').value};
  let url, body;
  if (chat) {
    history.push({role: 'user', content: text});
    url = '/v1/chat/completions';
    body = Object.assign({messages: history, logprobs: true, top_logprobs: 5}, common);
  } else {
    url = '/v1/completions';
    body = Object.assign({prompt: text, logprobs: 5}, common);
  }
  const res = await fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json'},
                                body: JSON.stringify(body)});
  if (!res.ok) { box.textContent = 'error: ' + (await res.text()); return; }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '', answer = '';
  const spans = [];
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    buf += decoder.decode(value, {stream: true});
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, at); buf = buf.slice(at + 2);
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const ev = JSON.parse(line.slice(6));
      for (const c of ev.choices || []) {
        const piece = chat ? (c.delta && c.delta.content) || '' : c.text || '';
        answer += piece;
        const lps = chat ? (c.logprobs && c.logprobs.content) || [] : [];
        if (lps.length) lps.forEach(lp => spans.push(addToken(box, lp.token, lp)));
        else if (piece) addToken(box, piece, null);
      }
      if (ev.draft_rounds) markRounds(spans, ev.draft_rounds);
      if (ev.timings) {
        const t = ev.timings;
        let s = t.predicted_n + ' tokens, ' + t.predicted_per_second.toFixed(1) + ' tokens/s';
        if (t.draft_n !== undefined)
          s += ', drafts accepted ' + t.draft_n_accepted + ' / ' + t.draft_n +
               ' (rejected ' + (t.draft_n - t.draft_n_accepted) + ')';
        if (ev.identity) s += ', output sha256 ' + ev.identity.output_sha256.slice(0, 16);
        document.getElementById('stats').textContent = s;
      }
    }
  }
  if (chat) history.push({role: 'assistant', content: answer});
}
document.getElementById('send').onclick = send;
document.getElementById('input').addEventListener('keydown', e => {
  if (e.key === 'Enter' && e.ctrlKey) send();
});
fetch('/props').then(r => r.json()).then(p => {
  document.getElementById('model').textContent = p.model_alias + ' - ' + p.total_slots + ' slots';
  if (!p.chat_template) document.getElementById('mode').value = 'completion';
});
</script></body></html>
)HTML";
}

}  // namespace lockstep::server
