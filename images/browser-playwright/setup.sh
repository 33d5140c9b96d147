# playwright-core from npm, installed at build time from the lockfile (exact
# version and integrity hash); it drives the image's own Chromium and never
# downloads a browser. Nothing is fetched when a sandbox runs.
cd /opt/genesis/browser
npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn
rm -rf /root/.npm /root/.cache
chmod 0755 /opt/genesis/browser/chromium.sh
chmod -R a+rX /opt/genesis/browser
# The versions GET /v1/profiles reports: the image builder turns each file
# of /etc/genesis/versions into an image label. (Chromium's wrapper cannot
# run here: it reads /proc/cpuinfo, which the build chroot lacks.)
mkdir -p /etc/genesis/versions
dpkg-query -W -f '${Version}' chromium | sed 's/-[^-]*$//' >/etc/genesis/versions/chromium
node -p 'require("/opt/genesis/browser/node_modules/playwright-core/package.json").version' >/etc/genesis/versions/playwright
node --version | sed 's/^v//' >/etc/genesis/versions/node
test -s /etc/genesis/versions/chromium
test -s /etc/genesis/versions/playwright
