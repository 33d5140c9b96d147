#!/bin/sh
# The browser of a desktop-browser sandbox: Debian's Chromium in a window on
# the sandbox's display (not headless: a person and the agent see and use
# it), as the sandbox user, started once the X server has made its socket.
#
# --no-sandbox: Chromium's own sandbox needs user namespaces or a setuid
# helper, which a container with no capabilities and no-new-privileges does
# not give (under runc and under runsc alike). The boundary is the sandbox:
# gVisor's kernel under runsc (the profile's default), dropped capabilities,
# seccomp, no network but what the policy allows. --test-type keeps
# Chromium from showing a warning bar about it over every page.
set -eu
n="${DISPLAY#:}"
i=0
while [ ! -S "/tmp/.X11-unix/X$n" ] && [ "$i" -lt 500 ]; do
	sleep 0.02
	i=$((i + 1))
done
profile="${GENESIS_BROWSER_PROFILE:-/home/sandbox/.genesis-desktop-browser}"
mkdir -p "$profile"
rm -f "$profile/SingletonLock" "$profile/SingletonSocket" "$profile/SingletonCookie"
set -- --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir="$profile" \
	--no-first-run --no-default-browser-check --disable-background-networking \
	--disable-component-update --disable-sync --disable-default-apps \
	--disable-breakpad --disable-crash-reporter --metrics-recording-only --disable-quic \
	--disable-features=AutofillServerCommunication,OptimizationHints,Translate,MediaRouter \
	--disable-client-side-phishing-detection --no-pings \
	--password-store=basic --use-mock-keychain --start-maximized --test-type \
	--window-position=0,0 --window-size="${GENESIS_DISPLAY_WIDTH:-1280},${GENESIS_DISPLAY_HEIGHT:-800}" "$@"
# Networked policies give the sandbox HTTPS_PROXY (the egress gateway).
if [ -n "${HTTPS_PROXY:-}" ]; then
	set -- "$@" --proxy-server="$HTTPS_PROXY"
fi
exec "${GENESIS_CHROMIUM:-/usr/bin/chromium}" "$@" about:blank
