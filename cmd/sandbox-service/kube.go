package main

import (
	"log/slog"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver/kube"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/sandbox"
)

// newKubeDriver makes the Kubernetes driver of cfg. The agents' tokens
// are derived from a key of the data dir: replicas must share that file
// (docs/kubernetes.md mounts it from a Secret).
func newKubeDriver(cfg *config.Config, log *slog.Logger) (*kube.Driver, error) {
	key, err := ports.LoadOrCreateKey(filepath.Join(cfg.DataDir, "keys", "agent-token.key"))
	if err != nil {
		return nil, err
	}
	k := cfg.Kubernetes
	rcs := map[sandbox.Runtime]string{}
	for rt, rc := range k.RuntimeClasses {
		rcs[sandbox.Runtime(rt)] = rc
	}
	return kube.New(kube.Config{
		Kubeconfig: k.Kubeconfig, Namespace: k.Namespace, RuntimeClasses: rcs, AgentImage: k.AgentImage,
		PullPolicy: corev1.PullPolicy(k.PullPolicy), AgentPort: k.AgentPort, RequestRatio: k.RequestRatio, StorageClass: k.StorageClass, TokenKey: key, Logger: log.With("driver", "kubernetes"),
	})
}
