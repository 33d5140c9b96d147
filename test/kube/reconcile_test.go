//go:build kube

package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// TestReconcilePods: the reconciler keeps Pods as it keeps Docker
// containers. A sandbox's TTL ends it and takes its Pod away; a sandbox
// whose Pod was deleted behind the service's back is marked failed; a Pod
// labelled as this instance's with no record (an orphan) is removed after
// the orphan grace; a Pod of another instance is left alone.
func TestReconcilePods(t *testing.T) {
	clearManagedPods(t)
	t.Cleanup(func() { clearManagedPods(t) })
	s := startService(t, t.TempDir(), "intervals: {reconcile: 1s, orphan_grace: 1s}\n")
	c := s.client()
	cs := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	create := func(ttl int64) *client.Sandbox {
		t.Helper()
		sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: "runc", RiskLevel: "low", TTLSeconds: ttl}, "")
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	short, victim, template := create(3), create(600), create(600)
	gone := podOf(ctx, t, cs, victim.ID)
	forceDelete(ctx, t, cs, gone.Name)

	// Pods made by hand from a sandbox's own: one of this instance for a
	// sandbox it has no record of, one of another instance.
	tp := podOf(ctx, t, cs, template.ID)
	orphan := copyPod(ctx, t, cs, tp, "genesis-orphan-"+fmt.Sprint(time.Now().UnixNano()), "sbx_orphanorphanorphan", "")
	foreign := copyPod(ctx, t, cs, tp, "genesis-foreign-"+fmt.Sprint(time.Now().UnixNano()), "sbx_foreignforeignfor", "gs-other-instance")

	eventually(t, time.Minute, "the expired sandbox destroyed and its Pod gone", func() (bool, string) {
		sb, err := c.GetSandbox(ctx, short.ID)
		if err != nil {
			return false, err.Error()
		}
		pods := livePods(ctx, t, cs, "dev.genesis.sandbox="+short.ID)
		return sb.State == "destroyed" && pods == 0, fmt.Sprintf("state %s, %d pods", sb.State, pods)
	})
	eventually(t, time.Minute, "the sandbox whose Pod was deleted marked failed", func() (bool, string) {
		sb, err := c.GetSandbox(ctx, victim.ID)
		if err != nil {
			return false, err.Error()
		}
		return sb.State == "failed" && sb.FailureReason != "", sb.State + " " + sb.FailureReason
	})
	eventually(t, time.Minute, "the orphan Pod removed", func() (bool, string) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, orphan, metav1.GetOptions{})
		return err != nil, fmt.Sprint(err)
	})
	// The template sandbox still answers, and the other instance's Pod is
	// untouched after several more passes (each 1 s).
	if res, err := c.Exec(ctx, template.ID, client.ExecRequest{Command: []string{"echo", "kept"}}); err != nil || res.Stdout != "kept\n" {
		p := podOf(ctx, t, cs, template.ID)
		b, _ := json.MarshalIndent(p.Status, "", " ")
		t.Errorf("exec in the kept sandbox: %+v, %v; its Pod (deleting %v): %s", res, err, p.DeletionTimestamp, b)
	}
	time.Sleep(3 * time.Second) // several reconcile passes; nothing to poll for
	if p, err := cs.CoreV1().Pods("default").Get(ctx, foreign, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the Pod of another instance was touched: %v", err)
	}
}

// podOf returns a sandbox's Pod.
func podOf(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, id string) *corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "dev.genesis.sandbox=" + id})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("the Pod of %s: %d pods, %v", id, len(l.Items), err)
	}
	return &l.Items[0]
}

// forceDelete deletes a Pod at once, finalizer and all.
func forceDelete(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Pods("default").Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

// copyPod makes a Pod named name from p's spec and labels with the
// sandbox label set to sandboxID and, if instance is set, the instance
// label to instance; it is held by a scheduling gate (it never runs) and
// carries no finalizer.
func copyPod(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, p *corev1.Pod, name, sandboxID, instance string) string {
	t.Helper()
	var all map[string]string
	if err := json.Unmarshal([]byte(p.Annotations["dev.genesis/labels"]), &all); err != nil {
		t.Fatalf("labels of %s: %v", p.Name, err)
	}
	labels := maps.Clone(p.Labels)
	for _, m := range []map[string]string{all, labels} {
		m["dev.genesis.sandbox"] = sandboxID
		if instance != "" {
			m["dev.genesis.instance"] = instance
		}
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	spec := *p.Spec.DeepCopy()
	spec.NodeName = ""
	spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "test.genesis/hold"}}
	q := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{"dev.genesis/labels": string(b)}}, Spec: spec}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return name
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, within, 200*time.Millisecond, what, cond)
}

// TestClusterFull: a sandbox no node of the cluster can take (its Pod
// requests more CPU than the node has) is refused at once, 503
// capacity_exhausted with the scheduler's reason, not after the agent's
// wait; its record is failed and no Pod is left. The host's CPUs bound
// nothing: admission lets it through to the cluster.
func TestClusterFull(t *testing.T) {
	clearManagedPods(t)
	t.Cleanup(func() { clearManagedPods(t) })
	s := startService(t, t.TempDir(), "request_ratio: 1\n")
	c := s.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := clientset(t)
	node, err := cs.CoreV1().Nodes().Get(ctx, "genesis-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpus := node.Status.Allocatable.Cpu().AsApproximateFloat64()
	if cpus >= 4 {
		t.Skipf("the node has %v CPUs; a sandbox asks for at most 4", cpus)
	}
	t0 := time.Now()
	_, err = c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: "runc", RiskLevel: "low",
		Resources: &client.Resources{CPU: 4}}, "")
	took := time.Since(t0)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Problem.Code != "capacity_exhausted" || !strings.Contains(apiErr.Problem.Detail, "Insufficient cpu") {
		t.Fatalf("create of a sandbox larger than the node: %v; want 503 capacity_exhausted naming Insufficient cpu", err)
	}
	if took > 20*time.Second {
		t.Errorf("refused after %v; the scheduler's verdict comes in a second", took)
	}
	list, err := c.ListSandboxes(ctx, client.ListSandboxesOptions{States: []string{"failed"}})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("failed sandboxes: %+v, %v; want the refused one", list, err)
	}
	noManagedPods(t)
}
