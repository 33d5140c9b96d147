#!/usr/bin/env bash
# Brings up a single-node Kubernetes control plane on this host for the
# Kubernetes driver's tests (docs/kubernetes-dev.md): etcd (Debian's
# etcd-server) and kube-apiserver on loopback, kube-controller-manager, a
# containerd of its own (its own root, state and socket; Docker's is not
# touched) with runc and runsc (RuntimeClass gvisor) handlers, a kubelet,
# and a CNI bridge with no NAT and no default route in the pods. Pods are
# bound to the node by name (no scheduler). Idempotent: a part that runs
# is left alone. hack/kube/down.sh takes it all away again.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
KUBE_CACHE=${KUBE_CACHE:-/var/cache/genesis-kube}
STATE=${KUBE_STATE:-/var/lib/genesis-kube}
RUN=${KUBE_RUN:-/run/genesis-kube}
BIN=$KUBE_CACHE/bin
NODE=genesis-node
API_PORT=${KUBE_API_PORT:-16443}
ETCD_PORT=${KUBE_ETCD_PORT:-23790}
BRIDGE=gkube0
POD_CIDR=${KUBE_POD_CIDR:-10.251.0.0/24}
POD_GW=${POD_CIDR%.*}.1
SOCK=$RUN/containerd.sock
PAUSE_IMAGE=genesis.local/pause:1

log() { echo "kube up: $*"; }
running() { [[ -f $RUN/$1.pid ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
start() { # name command...
	local name=$1
	shift
	if running "$name"; then return; fi
	log "starting $name"
	setsid "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}
wait_for() { # what seconds command...
	local what=$1 secs=$2
	shift 2
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > end)); then
			log "$what did not come up in ${secs}s; see $STATE/logs"
			exit 1
		fi
		sleep 0.2
	done
}

[[ $(id -u) == 0 ]] || { echo "kube up: run as root" >&2; exit 1; }
"$here/build.sh"
if ! command -v etcd >/dev/null; then
	log "installing etcd-server (Debian)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
	# The package may start its own etcd: this plane runs its own, on other ports.
	pkill -x etcd 2>/dev/null || true
fi
mkdir -p "$STATE"/{logs,pki,etcd,containerd,kubelet,cni,manifests} "$RUN"
chmod 700 "$STATE/pki"

# Certificates, keys, kubeconfigs.
(cd "$root" && go run ./hack/kube/certs -dir "$STATE/pki" -node "$NODE" -ip "$POD_GW")
kubeconfig() { # name cert
	cat >"$STATE/$1.kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: genesis
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$STATE/pki/ca.pem"}
users:
- name: $2
  user: {client-certificate: "$STATE/pki/$2.pem", client-key: "$STATE/pki/$2-key.pem"}
contexts:
- name: genesis
  context: {cluster: genesis, user: $2}
current-context: genesis
EOT
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler
kubeconfig kubelet kubelet
export KUBECONFIG=$STATE/admin.kubeconfig

# etcd and the API server, on loopback.
start etcd etcd --name genesis --data-dir "$STATE/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
	--initial-cluster "genesis=http://127.0.0.1:$((ETCD_PORT + 10))"
wait_for etcd 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
start apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
	--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --endpoint-reconciler-type none \
	--service-cluster-ip-range 10.250.0.0/24 --allow-privileged=false --authorization-mode Node,RBAC \
	--client-ca-file "$STATE/pki/ca.pem" --tls-cert-file "$STATE/pki/apiserver.pem" --tls-private-key-file "$STATE/pki/apiserver-key.pem" \
	--kubelet-client-certificate "$STATE/pki/apiserver-kubelet-client.pem" --kubelet-client-key "$STATE/pki/apiserver-kubelet-client-key.pem" \
	--kubelet-certificate-authority "$STATE/pki/ca.pem" --kubelet-preferred-address-types InternalIP \
	--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$STATE/pki/sa.pub" \
	--service-account-signing-key-file "$STATE/pki/sa.key"
wait_for kube-apiserver 60 kubectl get --raw /readyz
start controller-manager "$BIN/kube-controller-manager" --kubeconfig "$STATE/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$STATE/controller-manager.kubeconfig" --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 0 --leader-elect=false --use-service-account-credentials \
	--service-account-private-key-file "$STATE/pki/sa.key" --root-ca-file "$STATE/pki/ca.pem" \
	--controllers '*,-nodeipam'
# The scheduler binds pods to the node (the driver holds a pod back with a
# scheduling gate until its sandbox starts).
start scheduler "$BIN/kube-scheduler" --kubeconfig "$STATE/scheduler.kubeconfig" \
	--authentication-kubeconfig "$STATE/scheduler.kubeconfig" --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 0 --leader-elect=false

# containerd of its own, runc and runsc handlers, the pod network.
cat >"$STATE/containerd/config.toml" <<EOT
version = 3
root = "$STATE/containerd/root"
state = "$RUN/containerd"
[grpc]
  address = "$SOCK"
[plugins.'io.containerd.cri.v1.runtime']
  # This VM lacks CAP_SYS_RESOURCE: containerd must not lower OOM scores.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
    # gVisor through its own shim (containerd-shim-runsc-v1, built from
    # the gVisor module runsc comes from): the runc shim with runsc as its
    # binary does not run gVisor pods.
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$BIN"]
    conf_dir = "$STATE/cni"
[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"
EOT
# A bridge with no NAT and no default route in the pods, its ports isolated
# from each other: a pod reaches neither another pod nor anything off the
# bridge, and the host drops connections a pod opens to it (below); the
# host (the service) opens connections to the pods.
cat >"$STATE/cni/10-genesis.conflist" <<EOT
{"cniVersion": "1.0.0", "name": "genesis", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "isDefaultGateway": false, "ipMasq": false, "hairpinMode": false, "portIsolation": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]], "routes": [],
            "dataDir": "$STATE/cni/ipam"}},
  {"type": "loopback"}]}
EOT
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
	ip link add "$BRIDGE" type bridge
	ip addr add "$POD_GW/${POD_CIDR#*/}" dev "$BRIDGE"
	ip link set "$BRIDGE" up
fi
# Nothing from the pods is forwarded off the bridge.
iptables -C FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP 2>/dev/null || iptables -I FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP
# Nor does a pod open a connection to the host: only answers come back.
iptables -C INPUT -i "$BRIDGE" -m conntrack --ctstate NEW -j DROP 2>/dev/null ||
	iptables -I INPUT -i "$BRIDGE" -m conntrack --ctstate NEW -j DROP
PATH=$BIN:$PATH start containerd "$BIN/containerd" --config "$STATE/containerd/config.toml"
wait_for containerd 30 ctr -a "$SOCK" version

# The pause image, built here from hack/kube/pause (no registry).
if ! ctr -a "$SOCK" -n k8s.io images ls -q | grep -qx "$PAUSE_IMAGE"; then
	log "building $PAUSE_IMAGE"
	ctx=$(mktemp -d)
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/pause" ./hack/kube/pause)
	printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
	docker build -q -t "$PAUSE_IMAGE" "$ctx" >/dev/null
	docker save "$PAUSE_IMAGE" | ctr -a "$SOCK" -n k8s.io images import - >/dev/null
	rm -rf "$ctx"
fi

# The kubelet.
cat >"$STATE/kubelet/config.yaml" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $POD_GW
port: 10250
readOnlyPort: 0
cgroupDriver: cgroupfs
# This VM is cgroup v1, which the kubelet refuses unless told, and lacks
# CAP_SYS_RESOURCE, so it must not lower its own OOM score.
failCgroupV1: false
oomScoreAdj: 0
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$STATE/pki/ca.pem"}
authorization: {mode: AlwaysAllow}
tlsCertFile: "$STATE/pki/kubelet.pem"
tlsPrivateKeyFile: "$STATE/pki/kubelet-key.pem"
resolvConf: ""
protectKernelDefaults: false
localStorageCapacityIsolation: false
staticPodPath: "$STATE/manifests"
podLogsDir: "$STATE/kubelet/pod-logs"
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
EOT
PATH=$BIN:$PATH start kubelet "$BIN/kubelet" --config "$STATE/kubelet/config.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
	--root-dir "$STATE/kubelet/root" --hostname-override "$NODE" --node-ip "$POD_GW"
wait_for "the node" 90 sh -c "kubectl get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"

# RuntimeClasses: runc, and gvisor on the runsc handler.
kubectl apply -f - >/dev/null <<EOT
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: runc}
handler: runc
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
EOT
log "ready: KUBECONFIG=$STATE/admin.kubeconfig (node $NODE, containerd $SOCK)"
