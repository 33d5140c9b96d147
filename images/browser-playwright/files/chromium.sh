#!/bin/sh
# The browser service of a browser-playwright sandbox: headless Chromium as
# the sandbox user, its DevTools protocol on 127.0.0.1:9222 only (the
# service reaches it through the sandbox's agent; nothing listens outside).
#
# --no-sandbox: Chromium's own sandbox needs user namespaces or a setuid
# helper, which a container with no capabilities and no-new-privileges does
# not give (under runc and under runsc alike). The boundary is the sandbox:
# gVisor's kernel under runsc (the profile's default), dropped capabilities,
# seccomp, no network but what the policy allows.
set -eu
profile="${GENESIS_BROWSER_PROFILE:-/home/sandbox/.genesis-browser}"
downloads="${GENESIS_BROWSER_DOWNLOADS:-/workspace/downloads}"
mkdir -p "$profile/Default" "$downloads"
# Downloads land in the workspace without a prompt.
if [ ! -s "$profile/Default/Preferences" ]; then
	printf '{"download":{"default_directory":"%s","prompt_for_download":false,"directory_upgrade":true},"savefile":{"default_directory":"%s"}}\n' \
		"$downloads" "$downloads" >"$profile/Default/Preferences"
fi
# A browser that crashed leaves its singleton lock behind; the restart
# would refuse the profile.
rm -f "$profile/SingletonLock" "$profile/SingletonSocket" "$profile/SingletonCookie"
set -- --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
	--remote-debugging-address=127.0.0.1 --remote-debugging-port=9222 \
	--user-data-dir="$profile" --window-size="${GENESIS_BROWSER_WINDOW:-1280,800}" \
	--no-first-run --no-default-browser-check --disable-background-networking \
	--disable-component-update --disable-sync --disable-default-apps \
	--disable-breakpad --disable-crash-reporter --metrics-recording-only --disable-quic \
	--disable-features=AutofillServerCommunication,OptimizationHints,Translate,MediaRouter \
	--disable-client-side-phishing-detection --no-pings \
	--password-store=basic --use-mock-keychain "$@"
# Networked policies give the sandbox HTTPS_PROXY (the egress gateway):
# Chromium takes it as its proxy, so pages need no per-request settings.
if [ -n "${HTTPS_PROXY:-}" ]; then
	set -- "$@" --proxy-server="$HTTPS_PROXY"
fi
exec "${GENESIS_CHROMIUM:-/usr/bin/chromium}" "$@" about:blank
