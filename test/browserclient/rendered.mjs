// rendered.mjs URL opens a trace player page (an export's player.html, by
// file:// URL) in this machine's Chromium with Playwright's own client and
// prints one JSON line of how it rendered what the trace holds: the
// timeline's actors and summaries as the page shows them (text), the
// actor filter's options, how many elements the page has that no player
// makes (img, script, b, iframe: markup from the data), and whether a
// script from the data ran (window.__pwned).
import { launch, watchErrors, TIMEOUT as T } from './chromium.mjs';

const [url] = process.argv.slice(2);
const out = { ok: true, console_errors: [] };
let browser;
try {
  browser = await launch();
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  page.setDefaultTimeout(T);
  watchErrors(page, out.console_errors);
  await page.goto(url, { timeout: T });
  await page.waitForSelector('#player-events li');
  out.actors = await page.locator('#player-events .player-actor').allTextContents();
  out.summaries = await page.locator('#player-events .player-sum').allTextContents();
  out.options = await page.locator('#player-actor option').allTextContents();
  out.foreign = await page.evaluate(() => document.querySelectorAll('main img:not(#player-shot), main script, main b, main iframe').length);
  out.pwned = await page.evaluate(() => window.__pwned === 1);
} catch (e) {
  out.ok = false;
  out.error = String((e && e.stack) || e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(JSON.stringify(out));
