// console-desktop.mjs BASE KEY SANDBOX TENANT OUT_DIR drives the web
// console's desktop and trace views in this machine's Chromium with
// Playwright's own client and prints one JSON line of what it saw: sign in,
// #/desktop lists SANDBOX; Take over holds control and opens the live view
// in a new tab (its canvas read back); the agent's next action answers
// 409; Release gives control back; #/traces/SANDBOX shows the trace.
import { join } from 'node:path';
import { launch, watchErrors, TIMEOUT as T } from './chromium.mjs';

const [base, key, sandbox, tenant, outDir] = process.argv.slice(2);
const out = { ok: true, console_errors: [] };
let browser;
async function api(method, path, body) {
  const r = await fetch(base + path, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: await r.json().catch(() => null) };
}
try {
  browser = await launch();
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(T);
  const watch = (p, who) => watchErrors(p, out.console_errors, who);
  watch(page, 'console');
  await page.goto(`${base}/console/`);
  await page.fill('#key', key);
  await page.click('#signin');
  await page.waitForSelector('h1:text("Sandboxes")');

  await page.goto(`${base}/console/#/desktop`);
  await page.waitForSelector('h1:text("Desktops")');
  const row = page.locator(`tr[data-sandbox="${sandbox}"]`);
  await row.waitFor();
  out.requests_text = await row.locator('td').nth(4).textContent();
  const [viewer] = await Promise.all([ctx.waitForEvent('page'), row.locator('button[data-action="takeover"]').click()]);
  watch(viewer, 'viewer');
  await viewer.waitForSelector('body[data-state="connected"]');
  out.viewer_role = await viewer.textContent('#role');
  const start = Date.now();
  for (;;) {
    out.viewer_bright = await viewer.evaluate(() => {
      const c = document.querySelector('#screen canvas');
      if (!c || !c.width) return 0;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] > 200 && d[i + 1] > 200 && d[i + 2] > 200) n++;
      return n;
    });
    if (out.viewer_bright > 5000 || Date.now() - start > 30000) break;
    await viewer.waitForTimeout(100);
  }
  await viewer.screenshot({ path: join(outDir, 'desktop-viewer.png') });
  await page.waitForSelector(`tr[data-sandbox="${sandbox}"] td.holder:has-text("human:${tenant}")`);
  await page.screenshot({ path: join(outDir, 'desktops.png') });
  const refused = await api('POST', `/v1/sandboxes/${sandbox}/computer/actions`, { actions: [{ action: 'left_click', coordinate: [5, 5] }] });
  out.agent_status = refused.status;
  out.agent_code = refused.body && refused.body.code;
  await viewer.close();
  await page.locator(`tr[data-sandbox="${sandbox}"] button[data-action="release"]`).click();
  await page.waitForSelector(`tr[data-sandbox="${sandbox}"] td.holder:has-text("the agent may act")`);
  const after = await api('POST', `/v1/sandboxes/${sandbox}/computer/actions`, { actions: [{ action: 'mouse_move', coordinate: [5, 5] }] });
  out.agent_after_release = after.status;

  await page.goto(`${base}/console/#/traces/${sandbox}`);
  await page.waitForSelector('#player-events li');
  out.trace_items = await page.locator('#player-events li').count();
  await page.click('#player-events li[data-kind="computer.screenshot"] button');
  await page.waitForFunction(() => { const i = document.getElementById('player-shot'); return i && !i.parentElement.hidden && i.complete && i.naturalWidth > 0; });
  out.trace_shot_width = await page.evaluate(() => document.getElementById('player-shot').naturalWidth);
  await page.screenshot({ path: join(outDir, 'trace.png') });
} catch (e) {
  out.ok = false;
  out.error = String((e && e.stack) || e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(JSON.stringify(out));
if (!out.ok) process.exitCode = 1;
