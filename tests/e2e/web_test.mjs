// Browser test of the demo page: headless Debian Chromium driven by
// playwright-core loads the page from a running tern server, sends a message,
// sees streamed text arrive, and stops a second generation.
//
//   TERN_URL=http://127.0.0.1:8080 node tests/e2e/web_test.mjs
//
// Exits 0 on success; prints what it checked. Every request that is not to
// the server is blocked (and fails the test): the page must need nothing else.
import { check, main, serverUrl, waitReply, withPage } from './browser.mjs';

const base = serverUrl();

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

main(() => withPage(base, async (page) => {
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
  const { text: text1, lengths, meta: meta1 } = await waitReply(page, chat1);
  check(text1.length > 0, `streamed text arrived: ${JSON.stringify(text1.slice(0, 60))}`);
  check(lengths.size >= 2, `text grew in ${lengths.size} steps (streamed, not all at once)`);
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
}));
