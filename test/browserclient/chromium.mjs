// chromium.mjs: this machine's Chromium (Debian's /usr/bin/chromium)
// launched headless with Playwright's own client, as the test scripts use
// it, and a recorder of a page's console errors.
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core');

export const TIMEOUT = 60000;

export function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true, timeout: TIMEOUT,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-dev-shm-usage',
      // Tests reach only loopback: no name is looked up but *.localhost.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost, EXCLUDE *.localhost', '--disable-component-update', '--disable-sync'],
  });
}

// watchErrors pushes the page's console errors and uncaught exceptions
// onto errors, each prefixed by who.
export function watchErrors(page, errors, who = '') {
  const p = who ? `${who}: ` : '';
  page.on('console', (m) => { if (m.type() === 'error') errors.push(p + m.text()); });
  page.on('pageerror', (e) => errors.push(`${p}page error: ${e.message}`));
}
