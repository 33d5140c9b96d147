// The Playwright protocol server of a browser-playwright sandbox, on
// 127.0.0.1:9223 (path /playwright). It listens at once but launches its
// Chromium (the image's own, through the pinned playwright-core) only when
// the first client sends its first bytes, so an idle sandbox runs one
// browser, not two: the service's readiness probe, which connects and
// closes without a word, launches nothing.
import net from 'node:net';
import { chromium } from 'playwright-core';

const listenPort = 9223;
const innerPort = 9224;
let launching = null;

function launch() {
  if (!launching) {
    const proxy = process.env.HTTPS_PROXY ? { server: process.env.HTTPS_PROXY } : undefined;
    launching = chromium.launchServer({
      executablePath: process.env.GENESIS_CHROMIUM || '/usr/bin/chromium',
      headless: true,
      host: '127.0.0.1',
      port: innerPort,
      wsPath: '/playwright',
      proxy,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--disable-quic'],
    }).then((server) => {
      server.on('close', () => { process.exit(1); }); // the service supervisor restarts us
      return server;
    }, (err) => { launching = null; throw err; });
  }
  return launching;
}

net.createServer((client) => {
  client.on('error', () => client.destroy());
  client.once('data', (first) => {
    client.pause();
    launch().then(() => {
      const upstream = net.connect(innerPort, '127.0.0.1');
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.write(first);
      client.pipe(upstream).pipe(client);
      client.resume();
    }, (err) => {
      console.error('playwright server: launching chromium:', err.message);
      client.destroy();
    });
  });
}).listen(listenPort, '127.0.0.1', () => {
  console.log(`playwright-core ${process.env.npm_package_version || ''} protocol server on 127.0.0.1:${listenPort}/playwright`);
});
