// player.mjs URL ACTOR SHOT_SEQ OUT_PNG opens a trace player page (an
// export's player.html, by file:// URL) in this machine's Chromium with
// Playwright's own client and prints one JSON line of what it saw: the
// number of timeline items, how many stay visible when filtered by ACTOR,
// the natural size of the screenshot shown when the event SHOT_SEQ is
// selected, and the events the player passes through when played at 4×.
import { launch, watchErrors, TIMEOUT as T } from './chromium.mjs';

const [url, actor, shotSeq, outPng] = process.argv.slice(2);
const out = { ok: true, console_errors: [] };
let browser;
try {
  browser = await launch();
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  page.setDefaultTimeout(T);
  watchErrors(page, out.console_errors);
  await page.goto(url, { timeout: T });
  await page.waitForSelector('#player-events li');
  if (actor === 'video') {
    // Mode video: select the first event inside a segment and play; the
    // video element's time moves forward.
    const v = page.locator('#player-video');
    await v.waitFor({ state: 'visible' });
    await page.waitForFunction(() => document.getElementById('player-video').readyState >= 1);
    out.video_from = await page.evaluate(() => document.getElementById('player-video').currentTime);
    await page.click('#player-play');
    // Playing moves through 1-second segments, so the element's own time
    // falls back to a segment's start at each switch and may never reach
    // video_from + 0.3: what is summed is the playback seen within one
    // segment, sampled at every animation frame.
    const moved = await page.waitForFunction(() => {
      const v = document.getElementById('player-video');
      const p = (window.__played ||= { seg: v.dataset.segment, last: v.currentTime, sum: 0 });
      if (v.dataset.segment === p.seg && v.currentTime > p.last) p.sum += v.currentTime - p.last;
      p.seg = v.dataset.segment;
      p.last = v.currentTime;
      return p.sum > 0.3 ? p.sum : false;
    });
    out.video_to = out.video_from + (await moved.jsonValue());
    await page.screenshot({ path: outPng });
    console.log(JSON.stringify(out));
    await browser.close();
    process.exit(0);
  }
  out.items = await page.locator('#player-events li').count();
  out.title = await page.textContent('h1');
  await page.selectOption('#player-actor', actor);
  out.filtered = await page.locator('#player-events li:not([hidden])').count();
  out.filtered_actors = [...new Set(await page.locator('#player-events li:not([hidden])').evaluateAll((els) => els.map((e) => e.dataset.actor)))];
  await page.selectOption('#player-actor', '');
  await page.click(`#player-events li[data-seq="${shotSeq}"] button`);
  await page.waitForFunction(() => { const i = document.getElementById('player-shot'); return !i.parentElement.hidden && i.complete && i.naturalWidth > 0; });
  out.shot_width = await page.evaluate(() => document.getElementById('player-shot').naturalWidth);
  await page.screenshot({ path: outPng });
  // Play from the start at 4×: the current event moves forward.
  // Pause it once it has moved on, in the page's own turn: it cannot
  // reach the end between the check and the click (a pause sent as a
  // separate click could find it ended, and play it again). Should it
  // end first on a slow host, play it again from the start.
  await page.selectOption('#player-speed', '4');
  for (let attempt = 1; ; attempt++) {
    await page.click('#player-events li:first-child button');
    const from = Number(await page.getAttribute('.player', 'data-current'));
    await page.click('#player-play');
    const r = await (await page.waitForFunction((f) => {
      const root = document.querySelector('.player');
      const cur = Number(root.dataset.current);
      if (root.dataset.playing !== 'true') return { ended: true };
      if (cur <= f + 2) return false;
      document.getElementById('player-play').click(); // pause
      return { to: cur, playing: root.dataset.playing };
    }, from)).jsonValue();
    if (r.ended && attempt < 3) continue;
    out.played_from = from;
    out.played_to = r.ended ? from : r.to;
    out.playing_after_pause = r.ended ? 'ended before the pause' : r.playing;
    break;
  }
} catch (e) {
  out.ok = false;
  out.error = String((e && e.stack) || e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(JSON.stringify(out));
if (!out.ok) process.exitCode = 1;
