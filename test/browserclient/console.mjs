// console.mjs MODE BASE KEY OTHER_KEY ADMIN_KEY OUT_DIR PROFILE RUNTIME [CUT_URL]
// drives the web console at BASE/console/ in this machine's Chromium with
// Playwright's own client and prints one JSON line of what it saw.
// MODE flow: sign in (a wrong key first), create a sandbox, run a command
// and follow its log (through a dropped connection: a GET of CUT_URL makes
// the test's proxy cut every open connection; and a pause and resume), upload and view a file,
// refuse a huge one, run echo in the terminal, page through the audit log,
// visit the other views (screenshots of each in OUT_DIR), then another
// tenant opens the sandbox's URL. MODE perf: sign in and load the sandbox
// list, reporting when it was listed. MODE images: open the System view
// while PROFILE's image is built in the background and follow its row
// (the progress bar's values, the text) until it reads present.
import { createRequire } from 'node:module';
import { join } from 'node:path';
const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core');

const [mode, base, key, otherKey, adminKey, outDir, profile, runtime, cutURL] = process.argv.slice(2);
const out = { ok: true, steps: [], console_errors: [], screenshots: [] };
const T = 60000;
let browser;
let phase = 'start';

async function shot(page, name) {
  const p = join(outDir, `${name}.png`);
  await page.screenshot({ path: p, fullPage: true });
  out.screenshots.push(p);
}
// step ends a phase; console errors are reported with the phase they
// happened in (a refused key's 401 and a hidden sandbox's 404 are logged
// by Chromium as failed loads: the test allows exactly those).
function step(name, extra = {}) { out.steps.push({ name, ...extra }); phase = `after ${name}`; }
function watch(page, who) {
  page.on('console', (m) => { if (m.type() === 'error') out.console_errors.push({ phase, who, text: m.text() }); });
  page.on('pageerror', (e) => out.console_errors.push({ phase, who, text: `page error: ${e.message}` }));
}
async function signIn(page, k) {
  await page.goto(`${base}/console/`, { timeout: T });
  await page.fill('#key', k);
  await page.click('#signin');
}
// signedInPage signs in with k in a browser context of its own (its own
// sessionStorage), as another person would.
async function signedInPage(who, k) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await ctx.newPage();
  p.setDefaultTimeout(T);
  watch(p, who);
  await signIn(p, k);
  await p.waitForSelector('h1:text("Sandboxes")');
  return p;
}
async function api(method, path, body, k = key) {
  const r = await fetch(base + path, { method, headers: { Authorization: `Bearer ${k}`, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.status === 204 ? null : r.json();
}

try {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true, timeout: T,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-dev-shm-usage'],
  });
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true });
  const page = await ctx.newPage();
  page.setDefaultTimeout(T);
  watch(page, 'tenant');

  if (mode === 'perf') {
    await signIn(page, key);
    await page.waitForSelector('[data-listed]');
    const times = [];
    for (let i = 0; i < Number(process.env.CONSOLE_RELOADS || 5); i++) {
      await page.reload();
      await page.waitForSelector('[data-listed]');
      times.push(await page.evaluate(() => ({
        listed: Number(document.querySelector('[data-listed]').dataset.listed),
        ms: performance.getEntriesByName('sandboxes-listed')[0].startTime,
        dcl: performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,
      })));
    }
    out.perf = times;
    await shot(page, 'sandboxes-100');
  } else if (mode === 'images') {
    await signIn(page, key);
    await page.waitForSelector('h1:text("Sandboxes")');
    await page.goto(`${base}/console/#/system`);
    const row = `#images tr[data-image="${profile}"]`;
    await page.waitForSelector(`${row} progress`, { timeout: 5 * T });
    await shot(page, 'images-building');
    // The view asks again every 2 s by itself: no reload from here on.
    out.image_values = [];
    out.image_texts = [];
    const deadline = Date.now() + 15 * T;
    for (;;) {
      const seen = await page.evaluate((sel) => {
        const tr = document.querySelector(sel);
        const p = tr && tr.querySelector('progress');
        return { value: p ? p.value : null, status: tr ? tr.querySelector('.badge').textContent : '', text: tr ? tr.cells[2].textContent : '' };
      }, row);
      if (seen.value != null && out.image_values[out.image_values.length - 1] !== seen.value) out.image_values.push(seen.value);
      if (seen.text && !out.image_texts.includes(seen.text) && out.image_texts.length < 50) out.image_texts.push(seen.text);
      if (seen.status === 'present') { out.image_status = seen.status; break; }
      if (seen.status === 'failed' || Date.now() > deadline) throw new Error(`image row: ${JSON.stringify(seen)}`);
      await page.waitForTimeout(500);
    }
    await shot(page, 'images-present');
  } else {
    // A wrong key: a clear error, nothing stored.
    phase = 'wrong key';
    await signIn(page, 'wrong-key-0123456789');
    await page.waitForSelector('#signin-msg [role=alert]');
    out.wrong_key_message = await page.textContent('#signin-msg');
    out.stored_after_wrong_key = await page.evaluate(() => sessionStorage.length);
    await shot(page, 'signin-error');
    step('wrong key');

    phase = 'sign in';
    await page.fill('#key', key);
    await page.click('#signin');
    await page.waitForSelector('h1:text("Sandboxes")');
    out.who = await page.textContent('#who');
    out.key_in_url = page.url().includes(key);
    await shot(page, 'sandboxes');
    step('signed in');

    // Create a sandbox from a profile with a runtime and risk level.
    await page.selectOption('#create select[name=profile]', profile);
    await page.selectOption('#create select[name=runtime]', runtime);
    await page.selectOption('#create select[name=risk_level]', runtime === 'runsc' ? 'untrusted' : 'low');
    await page.fill('#create input[name=metadata]', 'purpose=console-e2e');
    await page.click('#create-submit');
    await page.waitForURL(/#\/sandboxes\/[^/]+$/, { timeout: 120000 });
    const sbID = decodeURIComponent(page.url().split('#/sandboxes/')[1]);
    out.sandbox_id = sbID;
    await page.waitForSelector('#sandbox-title');
    out.sandbox_facts = await page.textContent('dl.facts');
    await shot(page, 'sandbox');
    step('created', { id: sbID });

    // Run a command; its output streams in, paused and resumed midway.
    await page.fill('#script', 'for i in $(seq 1 50); do echo line-$i; sleep 0.1; done; echo oops-1 >&2; exit 3');
    await page.click('#run button[type=submit]');
    await page.waitForURL(/#\/jobs\//);
    out.job_id = decodeURIComponent(page.url().split('#/jobs/')[1]);
    await page.waitForFunction(() => /line-3\b/.test(document.querySelector('#log')?.textContent || ''));
    out.seen_while_running = !(await page.$('#exit [data-code]')) && !(await page.textContent('#exit'));
    // The connection drops (the test's proxy cuts it) and the log resumes.
    phase = 'drop';
    const cut = await (await fetch(cutURL)).text();
    out.cut_connections = Number(cut);
    await page.waitForFunction(() => /line-2\d\b/.test(document.querySelector('#log')?.textContent || ''), null, { timeout: 120000 });
    out.reconnects = Number(await page.getAttribute('#log', 'data-reconnects'));
    phase = 'job';
    await page.click('#pause');
    await page.waitForSelector('#log-status:text-matches("Paused")');
    await page.waitForTimeout(700); // lines arrive meanwhile; the resume must catch up without repeating
    await page.click('#pause');
    await page.waitForFunction(() => document.querySelector('#exit')?.dataset.code !== undefined, null, { timeout: 120000 });
    out.job_log = await page.textContent('#log');
    out.job_stderr = await page.$$eval('#log span.stderr', (s) => s.map((x) => x.textContent).join(''));
    out.job_exit = await page.textContent('#exit');
    out.job_state = await page.textContent('.view > p .badge');
    const dl = page.waitForEvent('download');
    await page.click('#download');
    const d = await dl;
    out.job_download_name = d.suggestedFilename();
    await shot(page, 'job');
    step('job');

    // Files: upload one, see it listed, view it; a huge one is refused.
    await api('POST', `/v1/sandboxes/${encodeURIComponent(sbID)}/exec`, { script: 'head -c 3000000 /dev/zero > /workspace/big.bin' });
    await page.goto(`${base}/console/#/sandboxes/${encodeURIComponent(sbID)}/files`);
    await page.waitForSelector('#upload');
    await page.setInputFiles('#upload-file', { name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hello from the console\n') });
    await page.click('#upload button[type=submit]');
    await page.waitForSelector('tr[data-name="hello.txt"]');
    out.files_listed = await page.$$eval('tbody tr', (rs) => rs.map((r) => r.dataset.name));
    await page.fill('#search input[name=content]', 'from the console');
    await page.click('#search button[type=submit]');
    await page.waitForSelector('#search-results table');
    out.search_results = await page.$$eval('#search-results tbody tr', (rs) => rs.map((r) => r.textContent));
    await shot(page, 'files');
    await page.click('tr[data-name="hello.txt"] a');
    await page.waitForSelector('#viewer pre');
    out.file_text = await page.textContent('#viewer pre');
    await page.goto(`${base}/console/#/sandboxes/${encodeURIComponent(sbID)}/files/view?path=%2Fworkspace%2Fbig.bin`);
    await page.waitForSelector('#viewer .note');
    out.big_file_note = await page.textContent('#viewer');
    out.big_file_download_offered = !!(await page.$('#download-file'));
    step('files');

    // Terminal: echo through the WebSocket (a ticket, no key in the URL).
    const wsURLs = [];
    page.on('websocket', (ws) => wsURLs.push(ws.url()));
    await page.goto(`${base}/console/#/sandboxes/${encodeURIComponent(sbID)}/terminal`);
    await page.waitForSelector('#term-status:text-matches("Connected")');
    await page.fill('#term-input', 'echo hi-$((6*7))');
    await page.press('#term-input', 'Enter');
    await page.waitForFunction(() => /hi-42/.test(document.querySelector('#term')?.textContent || ''));
    out.terminal_text = await page.innerText('#term');
    // A full-screen program's drawing: clear the screen, write at row 5,
    // column 10, typed into the screen itself (it has focus).
    await page.click('#term');
    await page.keyboard.type("printf '\\033[2J\\033[5;10HMARK\\033[20;1H'");
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => [...document.querySelectorAll('#term .vt-row')].some((r) => r.textContent.indexOf('MARK') === 9));
    // Its row on the screen (the rows below the scrollback): the fifth.
    out.terminal_mark_row = await page.evaluate(() => {
      const term = document.querySelector('#term');
      const rows = [...term.querySelectorAll('.vt-row')];
      return rows.findIndex((r) => r.textContent.indexOf('MARK') === 9) - (rows.length - Number(term.dataset.rows));
    });
    out.ws_urls_with_key = wsURLs.filter((u) => u.includes(key)).length;
    out.ws_urls = wsURLs.length;
    await shot(page, 'terminal');
    step('terminal');

    // Full-screen programs of the image draw in the screen: less (its
    // first page and its prompt on the last row), top (its header on the
    // first row), vi (its empty-line markers; the text typed into it is
    // saved).
    const screen = () => page.evaluate(() => {
      const term = document.querySelector('#term');
      const rows = [...term.querySelectorAll('.vt-row')].map((r) => r.textContent);
      return rows.slice(rows.length - Number(term.dataset.rows));
    });
    const until = async (what, ok) => {
      const deadline = Date.now() + T;
      for (;;) {
        const rows = await screen();
        if (ok(rows)) return rows;
        if (Date.now() > deadline) throw new Error(`${what}: the screen shows ${JSON.stringify(rows)}`);
        await page.waitForTimeout(100);
      }
    };
    await page.keyboard.type('seq 1 500 | less');
    await page.keyboard.press('Enter');
    let rows = await until('less', (r) => r[0].trim() === '1' && r[1].trim() === '2' && r[r.length - 1].startsWith(':'));
    out.less_rows = [rows[0].trim(), rows[rows.length - 2].trim(), rows[rows.length - 1].trim()];
    await shot(page, 'terminal-less');
    // Back at the shell's prompt before the next program is typed.
    const prompt = (r) => /[$#]$/.test((r.filter((x) => x.trim() !== '').pop() || '').trimEnd());
    await page.keyboard.press('q');
    await until('the prompt after less', prompt);
    await page.keyboard.type('top');
    await page.keyboard.press('Enter');
    rows = await until('top', (r) => r[0].startsWith('top - ') && r.some((x) => /PID +USER/.test(x)));
    out.top_header = rows[0].slice(0, 6);
    await shot(page, 'terminal-top');
    await page.keyboard.press('q');
    await until('the prompt after top', (r) => prompt(r) && !r[0].startsWith('top - '));
    await page.keyboard.type('vi /tmp/vi.txt');
    await page.keyboard.press('Enter');
    rows = await until('vi', (r) => r.filter((x) => x.startsWith('~')).length >= 5);
    out.vi_tildes = rows.filter((x) => x.startsWith('~')).length;
    await page.keyboard.type('ihello from vi');
    await page.keyboard.press('Escape');
    await page.keyboard.type(':wq');
    await page.keyboard.press('Enter');
    await until('the prompt after vi', (r) => prompt(r) && r.filter((x) => x.startsWith('~')).length === 0);
    await page.keyboard.type('clear; cat /tmp/vi.txt');
    await page.keyboard.press('Enter');
    await until('vi saved', (r) => r.some((x) => x.trim() === 'hello from vi'));
    out.vi_saved = 'hello from vi';
    step('full-screen programs');

    // Audit log: page forward and back.
    await page.goto(`${base}/console/#/audit?limit=3`);
    await page.waitForSelector('#audit-rows tr');
    const seqs = () => page.$$eval('#audit-rows tr', (rs) => rs.map((r) => Number(r.dataset.seq)));
    out.audit_page1 = await seqs();
    await page.click('#audit-next');
    await page.waitForFunction((first) => Number(document.querySelector('#audit-rows tr')?.dataset.seq) > first, out.audit_page1[2]);
    out.audit_page2 = await seqs();
    await shot(page, 'audit');
    await page.click('#audit-prev');
    await page.waitForFunction((first) => Number(document.querySelector('#audit-rows tr')?.dataset.seq) === first, out.audit_page1[0]);
    out.audit_back = await seqs();
    step('audit');

    for (const v of ['system', 'leases', 'pools', 'desktop']) {
      await page.goto(`${base}/console/#/${v}`);
      await page.waitForSelector('main h1');
      if (v === 'system') await page.waitForSelector('figure');
      await shot(page, v);
    }
    // The theme switch, and the dark view of a sandbox.
    await page.goto(`${base}/console/#/sandboxes/${encodeURIComponent(sbID)}`);
    await page.waitForSelector('#sandbox-title');
    // The sandbox's jobs, newest first: the command run above is there.
    out.sandbox_jobs = await page.$$eval('#jobs tbody tr', (rs) => rs.map((r) => r.dataset.id).filter(Boolean));
    // Renew: the sandbox expires in an hour.
    const before = (await api('GET', `/v1/sandboxes/${encodeURIComponent(sbID)}`)).expires_at;
    await page.click('#renew');
    for (let i = 0; ; i++) {
      const after = (await api('GET', `/v1/sandboxes/${encodeURIComponent(sbID)}`)).expires_at;
      const left = Date.parse(after) - Date.now();
      if (after !== before && left > 3500e3 && left <= 3600e3) { out.renewed = true; break; }
      if (i > 100) throw new Error(`renew: expiry ${before} → ${after}`);
      await page.waitForTimeout(100);
    }
    await page.waitForSelector('#sandbox-title');
    await page.waitForSelector('#history table');
    out.history = await page.textContent('#history');
    await page.click('button:text("Theme")');
    out.theme = await page.evaluate(() => document.documentElement.dataset.theme);
    await shot(page, 'sandbox-theme-switched');
    // Keyboard: the skip link is the first stop.
    await page.reload();
    await page.waitForSelector('#sandbox-title');
    await page.keyboard.press('Tab');
    out.first_tab = await page.evaluate(() => document.activeElement?.textContent);
    step('views');

    // Another tenant opening the sandbox's URL gets the not-found page.
    phase = 'other tenant';
    const p2 = await signedInPage('other', otherKey);
    out.other_list = await p2.$$eval('tbody tr', (rs) => rs.map((r) => r.dataset.id));
    await p2.goto(`${base}/console/#/sandboxes/${encodeURIComponent(sbID)}`);
    await p2.waitForSelector('#not-found');
    out.other_page = await p2.textContent('main');
    await shot(p2, 'not-found');
    step('other tenant');

    // The admin sees the tenants view.
    const p3 = await signedInPage('admin', adminKey);
    await p3.goto(`${base}/console/#/tenants`);
    await p3.waitForSelector('h1:text("Tenants")');
    out.tenants_text = await p3.textContent('main');
    // The admin lists every tenant's sandboxes: the tenant's is there, with
    // its tenant and a link that acts for that tenant.
    await p3.goto(`${base}/console/#/sandboxes?tenant=*`);
    await p3.waitForSelector(`tr[data-id="${sbID}"]`);
    out.admin_row = await p3.textContent(`tr[data-id="${sbID}"]`);
    out.admin_row_link = await p3.locator(`tr[data-id="${sbID}"] a`).count();
    // Opening it acts for its tenant: the sandbox's page, a command run
    // from it, and the banner that says so.
    await p3.click(`tr[data-id="${sbID}"] a`);
    await p3.waitForSelector('#sandbox-title');
    out.admin_page_title = await p3.textContent('#sandbox-title');
    out.admin_acting = await p3.textContent('#acting');
    await shot(p3, 'admin-acting');
    await p3.click('#stop-acting');
    await p3.waitForSelector('h1:text("Sandboxes")');
    out.admin_after_stop = await p3.locator('#acting').count();
    await p3.goto(`${base}/console/#/tenants`);
    await p3.waitForSelector('h1:text("Tenants")');
    await shot(p3, 'tenants');
    // A narrow screen (responsive layout).
    await p3.setViewportSize({ width: 390, height: 800 });
    await shot(p3, 'tenants-narrow');
    step('admin');
  }
} catch (e) {
  out.ok = false;
  out.error = String((e && e.stack) || e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(JSON.stringify(out));
if (!out.ok) process.exitCode = 1;
