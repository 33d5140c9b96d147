#!/usr/bin/env bash
# Builds the parts of a single-node Kubernetes control plane from the Go
# module proxy at pinned versions, into $KUBE_CACHE/bin (default
# /var/cache/genesis-kube), keyed by version: a second run is a no-op.
#   kube-apiserver, kube-controller-manager, kubelet  (k8s.io/kubernetes)
#   containerd, containerd-shim-runc-v2               (containerd v2)
#   bridge, host-local, loopback                      (CNI plugins)
# Nothing of theirs is copied into this repository: a throwaway module in
# the cache requires them, and `go build` fetches them from the proxy.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
CNI_VERSION=${CNI_VERSION:-v1.10.0}
# gVisor's containerd shim, at the version scripts/host-setup.sh builds runsc at.
RUNSC_VERSION=${GENESIS_RUNSC_VERSION:-$(sed -n 's/^RUNSC_VERSION="${GENESIS_RUNSC_VERSION:-\(.*\)}"$/\1/p' "$(dirname "$0")/../../scripts/host-setup.sh")}
KUBE_CACHE=${KUBE_CACHE:-/var/cache/genesis-kube}
BIN=$KUBE_CACHE/bin
stamp=$BIN/.built-4-$K8S_VERSION-$CONTAINERD_VERSION-$CNI_VERSION-$RUNSC_VERSION
if [[ -f $stamp ]]; then
	echo "kube build: $BIN is current ($K8S_VERSION, containerd $CONTAINERD_VERSION, CNI $CNI_VERSION)"
	exit 0
fi
mkdir -p "$BIN"
export GOFLAGS=-mod=mod CGO_ENABLED=0

# k8s.io/kubernetes replaces its staging modules with directories of its
# own tree, which a module download does not carry: point each at its
# published release (v0.x.y for v1.x.y) instead.
build_k8s() {
	local dir=$KUBE_CACHE/build/k8s-$K8S_VERSION staging=v0.${K8S_VERSION#v1.}
	mkdir -p "$dir"
	cd "$dir"
	curl -fsS "https://proxy.golang.org/k8s.io/kubernetes/@v/$K8S_VERSION.mod" -o upstream.mod
	{
		echo "module genesis.local/kubebuild"
		echo "go $(awk '$1 == "go" {print $2; exit}' upstream.mod)"
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo "replace ("
		sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' upstream.mod
		echo ")"
	} >go.mod
	# The version the binaries report (a module build has no git to ask).
	local v=k8s.io/component-base/version minor=${K8S_VERSION#v1.}
	minor=${minor%%.*}
	local ld="-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	for cmd in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		echo "kube build: $cmd $K8S_VERSION"
		go build -trimpath -ldflags "$ld" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
	done
}

build_module() { # name module version packages...
	local name=$1 mod=$2 ver=$3
	shift 3
	local dir=$KUBE_CACHE/build/$name-$ver
	mkdir -p "$dir"
	cd "$dir"
	printf 'module genesis.local/%sbuild\ngo 1.24\nrequire %s %s\n' "$name" "$mod" "$ver" >go.mod
	for pkg in "$@"; do
		echo "kube build: $pkg $ver"
		go build -trimpath -ldflags '-s -w' -o "$BIN/" "$pkg"
	done
}

build_k8s
build_module containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" \
	github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
build_module cni github.com/containernetworking/plugins "$CNI_VERSION" \
	github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/ipam/host-local \
	github.com/containernetworking/plugins/plugins/main/loopback
build_module gvisor gvisor.dev/gvisor "$RUNSC_VERSION" gvisor.dev/gvisor/shim
mv "$BIN/shim" "$BIN/containerd-shim-runsc-v1"
touch "$stamp"
echo "kube build: done in $BIN"
