// Shared by the browser tests: headless Debian Chromium through playwright-core,
// with every request that is not to the server blocked (and reported: the page
// must need nothing else), and page errors collected.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const TIMEOUT = Number(process.env.E2E_TIMEOUT_MS || 180000);

export function serverUrl() {
  const base = process.env.TERN_URL;
  if (!base) {
    console.error('set TERN_URL to the server, e.g. http://127.0.0.1:8080');
    process.exit(2);
  }
  return base;
}

export function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok -', what);
}

// Runs fn(page) on a fresh profile; then checks no foreign request and no page error.
// extraArgs: more Chromium flags (e.g. a fake microphone).
export async function withPage(base, fn, extraArgs = []) {
  const profile = mkdtempSync(join(tmpdir(), 'tern-e2e-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           ...extraArgs],
  });
  const foreign = [];
  const pageErrors = [];
  try {
    const host = new URL(base).host;
    await context.route('**/*', (route) => {
      const u = new URL(route.request().url());
      if (u.host === host || u.protocol === 'data:' || u.protocol === 'blob:') return route.continue();
      foreign.push(u.href);
      return route.abort();
    });
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(TIMEOUT);
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });
    await page.goto(base + '/');
    await watchReplies(page);
    await page.getByTestId('status').filter({ hasText: 'online' }).waitFor();
    check(true, 'page loaded and the WebSocket is online');
    await fn(page);
    check(foreign.length === 0, `no requests outside the server (${foreign.join(', ')})`);
    check(pageErrors.length === 0, `no page errors (${pageErrors.join(' | ')})`);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

// Records, inside the page, every length an assistant reply's body takes as
// the page renders it: a MutationObserver sees each WebSocket delta's update,
// however fast the tokens come, so "it streamed" never depends on poll timing.
async function watchReplies(page) {
  await page.evaluate(() => {
    window.__replyLengths = new Map();
    const note = (el) => {
      if (!(el instanceof Element) || !el.matches('.bubble.assistant .body')) return;
      const n = (el.textContent || '').length;
      if (!n) return;
      if (!window.__replyLengths.has(el)) window.__replyLengths.set(el, new Set());
      window.__replyLengths.get(el).add(n);
    };
    new MutationObserver((records) => {
      for (const r of records) note(r.type === 'characterData' ? r.target.parentElement : r.target);
    }).observe(document, { subtree: true, childList: true, characterData: true });
  });
}

// Waits until the chat's last reply has its stats line; returns its text, its
// stats line and the distinct text lengths the page rendered on the way (two
// or more: it streamed).
export async function waitReply(page, chat) {
  const reply = chat.locator('.bubble.assistant .body').last();
  const meta = chat.locator('.bubble.assistant .meta').last();
  await meta.filter({ hasText: /\S/ }).waitFor({ timeout: TIMEOUT });
  const lengths = new Set(await reply.evaluate((el) => [...(window.__replyLengths.get(el) || [])]));
  return { text: (await reply.textContent()) || '', lengths, meta: (await meta.textContent()) || '' };
}

export function main(fn) {
  fn().then(
    () => { console.log('e2e: all checks passed'); process.exit(0); },
    (e) => { console.error('e2e FAILED:', e.message); process.exit(1); },
  );
}
