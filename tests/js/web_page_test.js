// The chat page at `/` of a running `lockstep serve`, in a real headless Chromium (npm
// puppeteer-core, Debian's chromium): sending a message streams an answer whose tokens carry
// their logprobs, the tokens that were accepted drafts are marked, and the stats line reports
// drafts accepted and rejected.
// Usage: node web_page_test.js BASE_URL CHROMIUM_PATH. Exits 0 when all checks pass.
'use strict';
const assert = require('assert');
const puppeteer = require('puppeteer-core');

async function main() {
  const [base, chromium] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  let checks = 0;
  const check = (cond, what) => { assert.ok(cond, what); ++checks; };
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', e => errors.push(String(e)));
    await page.goto(base + '/', {waitUntil: 'load'});
    await page.waitForFunction(() => document.getElementById('model').textContent.includes('slots'));
    check(await page.$eval('#mode', e => e.value) === 'chat', 'chat mode (the server has a template)');
    await page.$eval('#max', e => { e.value = '16'; });
    await page.type('#input', 'Write a Python stack class.');
    await page.click('#send');
    await page.waitForFunction(
        () => document.getElementById('stats').textContent.includes('tokens/s'), {timeout: 30000});
    const titles = await page.$$eval('.assistant .tok', els => els.map(e => e.title));
    check(titles.length >= 1, 'the answer streamed in as tokens');
    check(titles.every(t => t.startsWith('logprob ')), 'every token shows its logprob');
    const stats = await page.$eval('#stats', e => e.textContent);
    check(/drafts accepted \d+ \/ \d+ \(rejected \d+\)/.test(stats), 'draft counts: ' + stats);
    check(/output sha256 [0-9a-f]{16}/.test(stats), 'output hash shown');
    const accepted = await page.$$eval('.assistant .tok.accepted', els => els.length);
    check(String(accepted) === /drafts accepted (\d+)/.exec(stats)[1],
          `accepted drafts marked per token (${accepted})`);
    check(errors.length === 0, 'no page errors: ' + errors.join('; '));
    console.log(`web page: ${checks} checks passed (${titles.length} tokens; ${stats})`);
  } finally {
    await browser.close();
  }
}

main().catch(e => {
  console.error('web page test failed:', e);
  process.exit(1);
});
