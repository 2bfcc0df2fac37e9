// Browser test of audio on the demo page, against a server started with an
// audio projector: Chromium attaches a WAV with the Audio button's file
// picker (the page converts it to 16 kHz WAV in the browser), sees the clip
// in the conversation and a streamed answer that encoded it, then asks a
// follow-up whose answer is marked as having reused the clip; the Mic button
// records from Chromium's fake microphone and the recording is attached.
//
//   TERN_URL=http://127.0.0.1:8080 TERN_AUDIO=tone.wav node tests/e2e/web_audio_test.mjs
import { readFileSync } from 'node:fs';
import { check, main, serverUrl, waitReply, withPage } from './browser.mjs';

const base = serverUrl();
const clip = readFileSync(process.env.TERN_AUDIO);

main(() => withPage(base, async (page) => {
  await page.fill('#max-tokens', '8');
  await page.fill('#temperature', '0');
  await page.check('#ignore-eos');
  const chat = page.getByTestId('chat').nth(0);
  await page.waitForFunction(() => !document.querySelector('[data-testid=attach-audio]').disabled);
  check(true, 'the audio button is enabled (the server says audio: true)');
  check(await page.getByTestId('attach').first().isDisabled(), 'the image button is not (no vision)');

  // 1. Attach a file; the clip waits in the composer; send.
  await chat.getByTestId('audio-file').setInputFiles({ name: 'tone.wav', mimeType: 'audio/wav', buffer: clip });
  await chat.getByTestId('attachment').first().waitFor({ timeout: 15000 });
  check(true, 'the attached clip waits in the composer');
  await chat.getByTestId('input').fill('What is this sound?');
  await chat.getByTestId('send').click();
  const sent = chat.locator('.bubble.user').last().getByTestId('clip');
  await sent.waitFor();
  check((await sent.getAttribute('src')).startsWith('data:audio/wav;base64,'), 'the clip is in the conversation');
  const first = await waitReply(page, chat);
  check(first.text.length > 0, `answer: ${JSON.stringify(first.text.slice(0, 60))}`);
  check(/audio: 1 encoded in \d+ ms/.test(first.meta), `the first answer encoded the clip: ${first.meta}`);

  // 2. A follow-up: the clip is inside the reused KV prefix.
  await chat.getByTestId('input').fill('Is it loud?');
  await chat.getByTestId('send').click();
  await waitReply(page, chat);
  const badge = chat.locator('.bubble.assistant').last().getByTestId('audio-cache');
  await badge.waitFor();
  check(/reused KV prefix/.test(await badge.getAttribute('title')),
        `the second answer is marked: ${await badge.getAttribute('title')}`);

  // 3. The microphone (Chromium's fake device): record, stop, attached.
  const chat2 = page.getByTestId('chat').nth(1);
  await chat2.getByTestId('mic').click();
  await page.waitForTimeout(700);
  await chat2.getByTestId('mic').click();
  await chat2.getByTestId('attachment').first().waitFor({ timeout: 15000 });
  check(true, 'a recording from the microphone is attached');
  await chat2.getByTestId('send').click();  // a clip alone may be sent
  const rec = await waitReply(page, chat2);
  check(/audio: 1 /.test(rec.meta), `the recording was sent and encoded: ${rec.meta}`);
}, ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream']));
