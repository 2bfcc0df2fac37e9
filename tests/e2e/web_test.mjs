// Browser test of the demo page: headless Debian Chromium driven by
// playwright-core loads the page from a running tern server, sends a message,
// sees streamed text arrive, and stops a second generation.
//
//   TERN_URL=http://127.0.0.1:8080 node tests/e2e/web_test.mjs
//
// Exits 0 on success; prints what it checked. Every request that is not to
// the server is blocked (and fails the test): the page must need nothing else.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.TERN_URL;
if (!base) {
  console.error('set TERN_URL to the server, e.g. http://127.0.0.1:8080');
  process.exit(2);
}
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
const TIMEOUT = Number(process.env.E2E_TIMEOUT_MS || 180000);

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok -', what);
}

async function metrics() {
  const text = await (await fetch(base + '/metrics')).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

async function main() {
  const profile = mkdtempSync(join(tmpdir(), 'tern-e2e-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const foreign = [];
  const pageErrors = [];
  try {
    const host = new URL(base).host;
    await context.route('**/*', (route) => {
      const u = new URL(route.request().url());
      if (u.host === host) return route.continue();
      foreign.push(u.href);
      return route.abort();
    });
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(TIMEOUT);
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });

    await page.goto(base + '/');
    await page.getByTestId('status').filter({ hasText: 'online' }).waitFor();
    check(true, 'page loaded and the WebSocket is online');
    const model = await page.getByTestId('model').textContent();
    check(/SmolLM2|context/.test(model), `model shown: ${model}`);

    const chats = page.getByTestId('chat');
    check((await chats.count()) >= 2, 'two chats open at start');
    await page.getByTestId('new-chat').click();
    check((await chats.count()) >= 3, 'a third chat opens');

    // 1. Send a message and watch the reply stream in.
    const chat1 = chats.nth(0);
    await page.fill('#max-tokens', '48');
    await page.fill('#temperature', '0');
    await chat1.getByTestId('input').fill('Write a short poem about the sea.');
    await chat1.getByTestId('send').click();
    const reply1 = chat1.locator('.bubble.assistant .body').last();
    const lengths = new Set();
    const t0 = Date.now();
    while (Date.now() - t0 < TIMEOUT) {
      const text = (await reply1.textContent()) || '';
      if (text.length) lengths.add(text.length);
      const meta = (await chat1.locator('.bubble.assistant .meta').last().textContent()) || '';
      if (meta) break;
      await page.waitForTimeout(15);
    }
    const text1 = await reply1.textContent();
    check(text1.length > 0, `streamed text arrived: ${JSON.stringify(text1.slice(0, 60))}`);
    check(lengths.size >= 2, `text grew in ${lengths.size} steps (streamed, not all at once)`);
    const meta1 = await chat1.locator('.bubble.assistant .meta').last().textContent();
    check(/TTFT \d+ ms/.test(meta1) && /tok\/s/.test(meta1), `per-reply stats: ${meta1}`);
    check(/stop|length/.test(meta1), 'the reply finished normally');
    check(/prompt \d+ \(\d+ cached\)/.test(meta1), `prompt and prefix-cache stats: ${meta1}`);

    // 2. Start a long generation and stop it.
    await page.fill('#max-tokens', '2000');
    await page.check('#ignore-eos');
    const chat2 = chats.nth(1);
    await chat2.getByTestId('input').fill('Tell me a very long story about a lighthouse.');
    await chat2.getByTestId('send').click();
    const reply2 = chat2.locator('.bubble.assistant .body').last();
    await page.waitForFunction((el) => el.textContent.length > 0, await reply2.elementHandle());
    check(await chat2.getByTestId('stop').isEnabled(), 'Stop is enabled while generating');
    await chat2.getByTestId('stop').click();
    const meta2 = chat2.locator('.bubble.assistant .meta').last();
    await meta2.filter({ hasText: 'cancelled' }).waitFor();
    check(true, `stopped: ${await meta2.textContent()}`);
    check(await chat2.getByTestId('send').isEnabled(), 'Send is enabled again after Stop');

    // 3. The server freed the sequence.
    let running = -1;
    for (let i = 0; i < 100; i++) {
      running = (await metrics())['tern_running_sequences'];
      if (running === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    check(running === 0, 'server shows no running sequences after Stop');

    check(foreign.length === 0, `no requests outside the server (${foreign.join(', ')})`);
    check(pageErrors.length === 0, `no page errors (${pageErrors.join(' | ')})`);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().then(
  () => { console.log('e2e: all checks passed'); process.exit(0); },
  (e) => { console.error('e2e FAILED:', e.message); process.exit(1); },
);
