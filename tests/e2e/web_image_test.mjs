// Browser test of images on the demo page, against a server started with a
// vision projector: Chromium attaches an image with the file picker, sees it
// in the conversation and a streamed answer, asks a follow-up question and
// sees the answer marked as having reused the cached image; a dropped and a
// pasted image show up as attachments too.
//
//   TERN_URL=http://127.0.0.1:8080 TERN_IMAGE=photo.png node tests/e2e/web_image_test.mjs
import { readFileSync } from 'node:fs';
import { check, main, serverUrl, waitReply, withPage } from './browser.mjs';

const base = serverUrl();
const image = readFileSync(process.env.TERN_IMAGE);

// Dispatches a drop or paste event carrying the image as a File, as a user's would.
// Drops or pastes a PNG on element `inner` of the chat with index `chat`.
async function dropOrPaste(page, chat, inner, kind, b64) {
  await page.evaluate(({ chat, inner, kind, b64 }) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], `${kind}.png`, { type: 'image/png' }));
    const target = document.querySelectorAll('[data-testid=chat]')[chat].querySelector(inner);
    const ev = kind === 'paste'
      ? new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true })
      : new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true });
    target.dispatchEvent(ev);
  }, { chat, inner, kind, b64 });
}

main(() => withPage(base, async (page) => {
  await page.fill('#max-tokens', '12');
  await page.fill('#temperature', '0');
  await page.check('#ignore-eos');
  const chat = page.getByTestId('chat').nth(0);
  await page.waitForFunction(() => !document.querySelector('[data-testid=attach]').disabled);
  check(true, 'the attach button is enabled (the server says vision: true)');

  // 1. Attach with the file picker; the preview appears; send.
  await chat.getByTestId('file').setInputFiles({ name: 'photo.png', mimeType: 'image/png', buffer: image });
  await chat.getByTestId('attachment').first().waitFor();
  check(true, 'the attached image is previewed in the composer');
  await chat.getByTestId('input').fill('Describe the picture.');
  await chat.getByTestId('send').click();
  const pic = chat.locator('.bubble.user').last().getByTestId('picture');
  await pic.waitFor();
  check((await pic.getAttribute('src')).startsWith('data:image/png;base64,'),
        'the image is shown in the conversation');
  check((await chat.getByTestId('attachment').count()) === 0, 'the composer is cleared after sending');
  const first = await waitReply(page, chat);
  check(first.text.length > 0, `streamed answer: ${JSON.stringify(first.text.slice(0, 60))}`);
  check(first.lengths.size >= 2, `text grew in ${first.lengths.size} steps (streamed)`);
  check(/images: 1 encoded in \d+ ms/.test(first.meta), `first answer encoded the image: ${first.meta}`);
  check((await chat.locator('.bubble.assistant').last().getByTestId('image-cache').count()) === 0,
        'the first answer is not marked as cached');

  // 2. A follow-up question: the image is inside the reused KV prefix.
  await chat.getByTestId('input').fill('What colours does it have?');
  await chat.getByTestId('send').click();
  const second = await waitReply(page, chat);
  check(second.text.length > 0, `second answer: ${JSON.stringify(second.text.slice(0, 60))}`);
  const badge = chat.locator('.bubble.assistant').last().getByTestId('image-cache');
  await badge.waitFor();
  check(/reused KV prefix|embedding cache/.test(await badge.getAttribute('title')),
        `the second answer is marked: ${await badge.textContent()} (${await badge.getAttribute('title')})`);

  // 3. The same picture in another chat, after a different first message: the
  // embedding cache (or the KV) serves it, and the answer is marked.
  const chat2 = page.getByTestId('chat').nth(1);
  await chat2.getByTestId('input').fill('Hello.');
  await chat2.getByTestId('send').click();
  await waitReply(page, chat2);
  await chat2.getByTestId('file').setInputFiles({ name: 'photo.png', mimeType: 'image/png', buffer: image });
  await chat2.getByTestId('attachment').first().waitFor();
  await chat2.getByTestId('send').click();  // an image alone may be sent
  const third = await waitReply(page, chat2);
  await chat2.locator('.bubble.assistant').last().getByTestId('image-cache').waitFor();
  check(/embedding cache/.test(third.meta), `same picture in another chat: ${third.meta}`);

  // 4. Drop and paste attach too (not sent).
  const b64 = image.toString('base64');
  await page.getByTestId('new-chat').click();
  const chat3 = page.getByTestId('chat').nth(2);
  await chat3.waitFor();
  await dropOrPaste(page, 2, '.messages', 'drop', b64);
  await dropOrPaste(page, 2, 'textarea', 'paste', b64);
  // The page reads the files asynchronously: wait for both previews (or time out and report).
  await chat3.getByTestId('attachment').nth(1).waitFor({ timeout: 15000 }).catch(() => {});
  const n = await chat3.getByTestId('attachment').count();
  check(n === 2, `a dropped and a pasted image are attached (${n})`);
}));
