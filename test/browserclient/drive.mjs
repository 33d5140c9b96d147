// drive.mjs MODE ENDPOINT KEY URL: connects with Playwright's own client
// (MODE cdp: chromium.connectOverCDP; pw: chromium.connect; pw-old: the
// older client's connect), fills and submits the form at URL, and prints
// one JSON line {ok, title, text, screenshot_bytes} or {ok: false, error}.
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const [mode, endpoint, key, url] = process.argv.slice(2);
const pkg = mode === 'pw-old' ? 'playwright-core-old' : 'playwright-core';
const { chromium } = require(pkg);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
let browser;
try {
  browser = mode === 'cdp'
    ? await chromium.connectOverCDP(endpoint, { headers, timeout: 30000 })
    : await chromium.connect(endpoint, { headers, timeout: 30000 });
  const context = browser.contexts()[0] ?? await browser.newContext();
  const page = await context.newPage();
  const out = { ok: true, version: browser.version() };
  if (url) {
    await page.goto(url, { timeout: 20000 });
    await page.fill('#q', 'hello genesis');
    await Promise.all([page.waitForURL(/\/done/), page.click('#go')]);
    out.title = await page.title();
    out.text = await page.textContent('#out');
    out.screenshot_bytes = (await page.screenshot()).length;
  }
  await page.close();
  console.log(JSON.stringify(out));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e && e.message || e) }));
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
}
