// viewer.mjs ROLE VIEWER_URL TEXT SHOT BASE KEY SANDBOX opens a desktop's
// live-view page (noVNC) in this machine's Chromium with Playwright's own
// client and prints one JSON line of what it saw. It waits for the page to
// connect and the canvas to show the desktop (pixels read back from the
// canvas), saves a screenshot to SHOT, then clicks into the desktop and
// types TEXT. As an observer it first turns the page's view-only off (a
// tampered page): the service must still drop the input. As a controller
// it then waits for the control lease to name it and checks, with the API
// key KEY, that the agent's next action on SANDBOX answers 409.
import { launch, watchErrors, TIMEOUT as T } from './chromium.mjs';

const [role, url, text, shotPath, base, key, sandbox] = process.argv.slice(2);
const out = { ok: true, console_errors: [] };
let browser;

// canvasStats reads the noVNC canvas back: its size, how many pixels are
// bright (an xterm's white) and how many distinct colours it has.
async function canvasStats(page) {
  return page.evaluate(() => {
    const c = document.querySelector('#screen canvas');
    if (!c || !c.width) return { width: 0, height: 0, bright: 0, colours: 0 };
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let bright = 0;
    const colours = new Set();
    for (let i = 0; i < d.length; i += 4) {
      if (d[i] > 200 && d[i + 1] > 200 && d[i + 2] > 200) bright++;
      if (colours.size < 1000) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    }
    return { width: c.width, height: c.height, bright, colours: colours.size };
  });
}

async function api(method, path, body) {
  const r = await fetch(base + path, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: await r.json().catch(() => null) };
}

try {
  browser = await launch();
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
  page.setDefaultTimeout(T);
  watchErrors(page, out.console_errors);
  const resp = await page.goto(url, { timeout: T });
  out.status = resp.status();
  out.csp = resp.headers()['content-security-policy'] || '';
  await page.waitForSelector('body[data-state="connected"]');
  out.role_text = await page.textContent('#role');
  // The control line and the agent's requests come from the link's /control.
  await page.waitForFunction(() => 'holder' in document.body.dataset);
  out.control_text = await page.textContent('#control');
  out.requests_text = await page.textContent('#requests');
  const start = Date.now();
  for (;;) {
    out.canvas = await canvasStats(page);
    if (out.canvas.bright > 5000 || Date.now() - start > 30000) break;
    await page.waitForTimeout(100);
  }
  await page.screenshot({ path: shotPath });
  if (role === 'observer') {
    await page.evaluate(() => { window.genesisViewer.viewOnly = false; });
  }
  // Into the xterm at the desktop's top left.
  const box = await page.locator('#screen canvas').boundingBox();
  await page.mouse.click(box.x + box.width * 0.1, box.y + box.height * 0.1);
  await page.keyboard.type(text, { delay: 5 });
  if (role === 'controller') {
    const deadline = Date.now() + 20000;
    for (;;) {
      const st = await api('GET', `/v1/sandboxes/${sandbox}/control`);
      out.holder = st.body && st.body.holder;
      if (out.holder && out.holder.startsWith('human:')) break;
      if (Date.now() > deadline) throw new Error(`control not taken: ${JSON.stringify(st)}`);
      await page.waitForTimeout(50);
    }
    const r = await api('POST', `/v1/sandboxes/${sandbox}/computer/actions`, { actions: [{ action: 'left_click', coordinate: [5, 5] }] });
    out.agent_status = r.status;
    out.agent_code = r.body && r.body.code;
  }
  // The typed text reaches the server before the page closes.
  await page.waitForTimeout(300);
} catch (e) {
  out.ok = false;
  out.error = String((e && e.stack) || e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(JSON.stringify(out));
if (!out.ok) process.exitCode = 1;
