#!/usr/bin/env bash
# host-setup.sh: make this Debian/Ubuntu host able to run Genesis Sandbox.
# Idempotent; used by `make run`, `make test` and .ci/run.
#   - installs docker.io, debootstrap, busybox-static, chromium (not with
#     GENESIS_SETUP_CHROMIUM=0), nodejs and npm when missing
#   - builds a pinned gVisor runsc from its Go module (Debian's runsc only as a fallback)
#   - merges the runsc runtime into /etc/docker/daemon.json without clobbering other keys
#   - starts dockerd when it does not answer, and waits for it with a deadline
set -euo pipefail

RUNSC_VERSION="${GENESIS_RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}"
RUNSC_BIN=/usr/local/bin/runsc
RUNSC_STAMP=/usr/local/lib/genesis/runsc.version
DAEMON_JSON=/etc/docker/daemon.json
DOCKER_WAIT_SECONDS="${GENESIS_DOCKER_WAIT_SECONDS:-60}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

say() { printf 'host-setup: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

docker_answers() { timeout 10 docker info >/dev/null 2>&1; }

if [ "$(id -u)" -ne 0 ]; then
  if docker_answers && docker info 2>/dev/null | grep -q runsc; then
    say "not root, but Docker answers and has runsc: nothing to do"
    exit 0
  fi
  die "must run as root (it installs packages and starts dockerd); re-run with sudo"
fi
if ! command -v apt-get >/dev/null 2>&1; then
  die "this script supports Debian/Ubuntu (apt-get not found); install Docker and gVisor runsc by hand, see docs/operations.md"
fi
command -v go >/dev/null 2>&1 || die "Go is required (go not on PATH)"

# 1. Packages.
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[ -x /bin/busybox ] || missing+=(busybox-static)
command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
# Debian's Chromium: browser tests drive it (preview links, the browser
# profile, the console); it is never downloaded by a test tool. make run
# does not need it (GENESIS_SETUP_CHROMIUM=0).
if [ "${GENESIS_SETUP_CHROMIUM:-1}" != 0 ]; then
  [ -x /usr/bin/chromium ] || missing+=(chromium fonts-liberation)
fi
# Node.js and npm: the tests drive the service with the official
# TypeScript MCP SDK (test/mcpclient, installed by npm ci from its lockfile).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# Debian's Python, httpx, pytest and mypy: the Python SDK's checks (sdk/python).
/usr/bin/python3 -c 'import httpx' >/dev/null 2>&1 || missing+=(python3-httpx)
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || missing+=(python3-pytest)
/usr/bin/python3 -c 'import mypy' >/dev/null 2>&1 || missing+=(python3-mypy)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The docker CLI may be missing if only the engine was installed.
command -v docker >/dev/null 2>&1 || die "docker CLI not found after install"

# 2. gVisor runsc, built from its Go module at a pinned version.
if [ ! -x "$RUNSC_BIN" ] || [ "$(cat "$RUNSC_STAMP" 2>/dev/null)" != "$RUNSC_VERSION" ]; then
  say "building gVisor runsc $RUNSC_VERSION (takes about a minute)"
  tmp="$(mktemp -d)"
  if CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install "gvisor.dev/gvisor/runsc@$RUNSC_VERSION" >"$tmp/build.log" 2>&1; then
    install -m 0755 "$tmp/runsc" "$RUNSC_BIN"
    mkdir -p "$(dirname "$RUNSC_STAMP")"
    echo "$RUNSC_VERSION" >"$RUNSC_STAMP"
    runsc_args=(--arg=--host-uds=create)
  else
    say "building runsc failed (log below); falling back to Debian's runsc package"
    tail -20 "$tmp/build.log" >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null || die "no runsc available"
    RUNSC_BIN="$(command -v runsc)"
    runsc_args=(--arg=--network=host --arg=--host-uds=create)
  fi
  rm -rf "$tmp"
else
  runsc_args=(--arg=--host-uds=create)
fi
if [ "$RUNSC_BIN" != /usr/local/bin/runsc ] || [ ! -f "$RUNSC_STAMP" ]; then
  runsc_args=(--arg=--network=host --arg=--host-uds=create)
fi

# 3. Register runsc with Docker without clobbering other keys, and beside it
# runsc-restore (cmd/genesis-runsc): runsc with the same arguments, whose
# start restores a container from a checkpoint when the service asks
# (docs/design/snapshots.md).
changed="$(cd "$here" && go run ./tools/daemonjson -file "$DAEMON_JSON" -name runsc -path "$RUNSC_BIN" "${runsc_args[@]}")"
RESTORE_BIN=/usr/local/lib/genesis/genesis-runsc
tmp="$(mktemp)"
(cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$tmp" ./cmd/genesis-runsc) || die "building cmd/genesis-runsc failed"
if ! cmp -s "$tmp" "$RESTORE_BIN"; then
  mkdir -p "$(dirname "$RESTORE_BIN")"
  install -m 0755 "$tmp" "$RESTORE_BIN"
fi
rm -f "$tmp"
changed2="$(cd "$here" && go run ./tools/daemonjson -file "$DAEMON_JSON" -name runsc-restore -path "$RESTORE_BIN" --arg=--genesis-runsc="$RUNSC_BIN" "${runsc_args[@]}")"
[ "$changed2" = changed ] && changed=changed

# 4. Start (or reload) dockerd.
dockerd_pid="$(pgrep -x dockerd | head -1 || true)"
if [ -n "$dockerd_pid" ] && [ "$changed" = changed ]; then
  say "daemon.json changed: reloading dockerd ($dockerd_pid)"
  kill -HUP "$dockerd_pid"
  sleep 1
fi
if ! docker_answers; then
  if [ -z "$dockerd_pid" ]; then
    say "starting dockerd"
    if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
      systemctl start docker || true
    fi
    if ! pgrep -x dockerd >/dev/null; then
      setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
    fi
  fi
  deadline=$(( $(date +%s) + DOCKER_WAIT_SECONDS ))
  until docker_answers; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      tail -20 /var/log/dockerd.log >&2 2>/dev/null || true
      die "dockerd did not answer within ${DOCKER_WAIT_SECONDS}s (log: /var/log/dockerd.log)"
    fi
    sleep 0.5
  done
fi
# Wait until the runsc runtime is visible (a HUP reload is asynchronous).
deadline=$(( $(date +%s) + 20 ))
until docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc-restore"'; do
  [ "$(date +%s)" -ge "$deadline" ] && die "dockerd does not list the runsc runtime; check $DAEMON_JSON"
  sleep 0.5
done
say "ready: $(docker version --format 'dockerd {{.Server.Version}} (API {{.Server.APIVersion}})'), runsc at $RUNSC_BIN"
