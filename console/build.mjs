// build.mjs bundles src/ into ../internal/console/dist (app.js, style.css,
// index.html; viewer.js, viewer-style.css, viewer.html for the desktop's
// live view), which the service embeds, and prints the bundle sizes.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const out = new URL('../internal/console/dist/', import.meta.url).pathname;
for (const f of readdirSync(out, { withFileTypes: true })) {
  if (!f.name.startsWith('.')) rmSync(join(out, f.name), { recursive: true });
}
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: 'src/main.js', style: 'src/style.css', viewer: 'src/viewer/viewer.js', 'viewer-style': 'src/viewer/viewer.css',
    player: 'src/player/offline.js', 'player-style': 'src/player/player.css' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome110', 'firefox115', 'safari16'],
  outdir: out,
  entryNames: '[name]',
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync('src/index.html', join(out, 'index.html'));
// The desktop's live-view page (a template the service fills in), with
// noVNC from npm bundled into viewer.js.
copyFileSync('src/viewer/viewer.html', join(out, 'viewer.html'));
let total = 0, gz = 0;
for (const f of readdirSync(out)) {
  if (f.startsWith('.')) continue;
  const b = readFileSync(join(out, f));
  total += b.length; gz += gzipSync(b).length;
  console.log(`console: ${f} ${statSync(join(out, f)).size} bytes`);
}
console.log(`console: bundle ${total} bytes (${gz} gzipped)`);
