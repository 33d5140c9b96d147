#!/usr/bin/env bash
# Builds the agent image of this tree — the static genesis-agent at
# /genesis-agent, nothing else — and imports it into the plane's containerd
# (no registry). Prints its reference. A deployment uses the service's own
# image instead (deploy/, docs/kubernetes.md): it carries the same binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SOCK=${KUBE_RUN:-/run/genesis-kube}/containerd.sock
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/genesis-agent" ./cmd/genesis-agent)
tag=$(sha256sum "$ctx/genesis-agent" | cut -c1-12)
ref=genesis.local/agent:$tag
if ! ctr -a "$SOCK" -n k8s.io images ls -q | grep -qx "$ref"; then
	printf 'FROM scratch\nCOPY genesis-agent /genesis-agent\nENTRYPOINT ["/genesis-agent"]\n' >"$ctx/Dockerfile"
	docker build -q -t "$ref" "$ctx" >/dev/null
	docker save "$ref" | ctr -a "$SOCK" -n k8s.io images import - >/dev/null
fi
echo "$ref"
