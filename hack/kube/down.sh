#!/usr/bin/env bash
# Takes away what hack/kube/up.sh brought up: its pods and containers, the
# kubelet, containerd, the controller manager, the API server and etcd,
# their mounts, the CNI bridge and the iptables rule, and the state
# (KEEP_STATE=1 keeps the state directory). The build cache stays.
set -uo pipefail

KUBE_CACHE=${KUBE_CACHE:-/var/cache/genesis-kube}
STATE=${KUBE_STATE:-/var/lib/genesis-kube}
RUN=${KUBE_RUN:-/run/genesis-kube}
BIN=$KUBE_CACHE/bin
BRIDGE=gkube0
SOCK=$RUN/containerd.sock

log() { echo "kube down: $*"; }
stop() { # name
	local f=$RUN/$1.pid
	[[ -f $f ]] || return 0
	local pid
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		log "stopping $1"
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
	fi
	rm -f "$f"
}

# Pod sandboxes and containers first, while containerd still answers.
if [[ -S $SOCK ]] && command -v crictl >/dev/null; then
	crictl -r "unix://$SOCK" rmp -fa >/dev/null 2>&1 || true
fi
stop kubelet
if [[ -S $SOCK ]]; then
	for c in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
		ctr -a "$SOCK" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
	done
	sleep 0.5
	for c in $(ctr -a "$SOCK" -n k8s.io containers ls -q 2>/dev/null); do
		ctr -a "$SOCK" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
		ctr -a "$SOCK" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
	done
fi
stop containerd
# Shims of ours that outlived containerd.
pkill -f "containerd-shim-runc-v2 .*-address $SOCK" 2>/dev/null || true
stop scheduler
stop controller-manager
stop apiserver
stop etcd

# Mounts under the state and run directories, deepest first.
awk -v s="$STATE" -v r="$RUN" '$2 ~ "^"s"/" || $2 ~ "^"r"/" || $2 == s || $2 == r {print $2}' /proc/self/mounts | sort -r |
	while read -r m; do umount -l "$m" 2>/dev/null || true; done
# Network namespaces the CNI made for our pods.
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do ip netns delete "$ns" 2>/dev/null || true; done
iptables -D FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP 2>/dev/null || true
iptables -D INPUT -i "$BRIDGE" -m conntrack --ctstate NEW -j DROP 2>/dev/null || true
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
if [[ ${KEEP_STATE:-0} != 1 ]]; then
	rm -rf "$STATE" "$RUN"
fi
log "done"
