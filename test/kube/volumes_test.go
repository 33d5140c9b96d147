//go:build kube

package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"genesis.dev/sandbox/client"
)

// testClass is the StorageClass TestVolumes makes: the plane has no
// dynamic provisioner, so the test offers static local PersistentVolumes
// of its own under a class that binds them when a Pod is scheduled.
const testClass = "genesis-test-local"

// apiCode is the problem code of err, or "" when it is no API error.
func apiCode(err error) (int, string) {
	var pe *client.APIError
	if !errors.As(err, &pe) {
		return 0, ""
	}
	return pe.Status, pe.Problem.Code
}

// offerLocalVolumes makes testClass, the cluster's default, and n local
// PersistentVolumes of it on the node, each a directory of the host; all
// are removed when t ends.
func offerLocalVolumes(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, n int) {
	t.Helper()
	node := "genesis-node"
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: testClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &mode,
		ReclaimPolicy:     &retain,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvs []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, name := range pvs {
			_ = cs.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{})
		}
		_ = cs.StorageV1().StorageClasses().Delete(ctx, testClass, metav1.DeleteOptions{})
	})
	base := t.TempDir()
	for i := range n {
		dir := filepath.Join(base, fmt.Sprintf("pv%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d-%d", testClass, strings.ToLower(t.Name()), os.Getpid(), i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: retain,
				StorageClassName:              testClass,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pvs = append(pvs, pv.Name)
	}
}

// TestVolumes: named volumes on Kubernetes, a PersistentVolumeClaim each.
// While the cluster offers no StorageClass a volume, and a sandbox that
// asks for one, is refused with 501 volumes_unavailable. Then, under runc and runsc: a volume written by
// one Pod sandbox is read by a later one after the first is deleted; a
// second writer or a reader beside the writer is 409 volume_busy, and
// deleting the volume while it is mounted 409 volume_in_use; a read-only
// mount refuses writes, and two readers hold it at once. After a restart
// of the service a new sandbox still reads it, and a lease mounts it
// writable until it is released. Deleting it removes its claim
// (TestVolumeFiles has its files without a sandbox). Where gVisor Pods cannot start (this VM; see
// docs/kubernetes-dev.md) a runsc sandbox asking for the volume is
// refused and holds nothing.
func TestVolumes(t *testing.T) {
	clearManagedPods(t)
	cs := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// What a failed run may have left.
	_ = cs.StorageV1().StorageClasses().Delete(ctx, testClass, metav1.DeleteOptions{})
	if l, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	} else if len(l.Items) > 0 {
		t.Fatalf("the plane has StorageClasses already (%s): this test needs one with none", l.Items[0].Name)
	}
	dataDir := t.TempDir()
	s := startService(t, dataDir, "")
	c := s.client()

	if _, err := c.CreateVolume(ctx, "data", 64); !hasCode(err, 501, "volumes_unavailable") {
		t.Fatalf("a volume with no StorageClass: %v; want 501 volumes_unavailable", err)
	}
	if _, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: "runc", RiskLevel: "low",
		Volumes: []client.VolumeMount{{Volume: "data", Path: "/mnt/data"}}}, ""); !hasCode(err, 501, "volumes_unavailable") {
		t.Fatalf("a sandbox mounting a volume with no StorageClass: %v; want 501 volumes_unavailable", err)
	}
	offerLocalVolumes(ctx, t, cs, 2)
	caps, err := c.Capabilities(ctx)
	if err != nil || !caps.Volumes.Supported {
		t.Fatalf("capabilities volumes %+v, %v; want supported once a class exists", caps.Volumes, err)
	}
	vol, err := c.CreateVolume(ctx, "data", 64)
	if err != nil {
		t.Fatal(err)
	}
	claim := "genesis-" + strings.ReplaceAll(vol.ID, "_", "-")
	pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the volume's claim: %v", err)
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if *pvc.Spec.StorageClassName != testClass || size.Value() != 64<<20 || pvc.Labels["dev.genesis.volume"] != vol.ID || pvc.Labels["dev.genesis.volume-name"] != "data" {
		t.Fatalf("claim %s: class %v, size %s, labels %v", claim, *pvc.Spec.StorageClassName, size.String(), pvc.Labels)
	}

	mount := func(ro bool) []client.VolumeMount {
		return []client.VolumeMount{{Volume: "data", Path: "/mnt/data", ReadOnly: ro}}
	}
	create := func(rt string, ro bool) (*client.Sandbox, error) {
		risk := "medium"
		if rt == "runc" {
			risk = "low"
		}
		return c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: risk, Volumes: mount(ro)}, "")
	}
	run := func(id, script string) client.ExecResult {
		t.Helper()
		res, err := c.Exec(ctx, id, client.ExecRequest{Script: script})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return *res
	}
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			w, err := create(rt, false)
			if rt == "runsc" && err != nil {
				// gVisor Pods do not start here: refused, never run under
				// runc, and the refused sandbox holds nothing.
				if st, code := apiCode(err); st != 409 || code != "runtime_unavailable" {
					t.Fatalf("runsc sandbox with a volume: %v; want 409 runtime_unavailable (or a sandbox)", err)
				}
				t.Logf("runsc refused: %v", err)
				if v, err := c.GetVolume(ctx, "data"); err != nil || len(v.Mounts) != 0 {
					t.Fatalf("after a refused create the volume is held: %+v, %v", v, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			line := "written under " + rt
			if res := run(w.ID, fmt.Sprintf("echo %q > /mnt/data/%s.txt && cat /mnt/data/%s.txt", line, rt, rt)); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != line {
				t.Fatalf("writing the volume: %+v", res)
			}
			if _, err := create(rt, false); !hasCode(err, 409, "volume_busy") {
				t.Fatalf("a second writer: %v; want 409 volume_busy", err)
			}
			if _, err := create(rt, true); !hasCode(err, 409, "volume_busy") {
				t.Fatalf("a reader beside the writer: %v; want 409 volume_busy", err)
			}
			if err := c.DeleteVolume(ctx, "data"); !hasCode(err, 409, "volume_in_use") {
				t.Fatalf("deleting a mounted volume: %v; want 409 volume_in_use", err)
			}
			if err := c.DeleteSandbox(ctx, w.ID); err != nil {
				t.Fatal(err)
			}
			noManagedPods(t)
			if v, err := c.GetVolume(ctx, "data"); err != nil || len(v.Mounts) != 0 {
				t.Fatalf("after its writer was deleted: %+v, %v; want no holder", v, err)
			}

			// A later Pod reads what the first wrote; read-only, it
			// cannot write; a second reader holds it at the same time.
			r1, err := create(rt, true)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := create(rt, true)
			if err != nil {
				t.Fatalf("a second reader: %v", err)
			}
			for _, id := range []string{r1.ID, r2.ID} {
				if res := run(id, "cat /mnt/data/"+rt+".txt"); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != line {
					t.Fatalf("reading in a later sandbox: %+v; want %q", res, line)
				}
			}
			res := run(r1.ID, "echo more > /mnt/data/more.txt")
			if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Read-only file system") {
				t.Fatalf("a write to a read-only mount: %+v; want it refused (EROFS)", res)
			}
			if v, err := c.GetVolume(ctx, "data"); err != nil || len(v.Mounts) != 2 {
				t.Fatalf("with two readers: %+v, %v", v, err)
			}
			for _, id := range []string{r1.ID, r2.ID} {
				if err := c.DeleteSandbox(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			noManagedPods(t)
		})
	}

	// The service restarts: the volume, its claim and its data are still
	// there, and a new sandbox reads what the runc one wrote.
	s.stop()
	s = startService(t, dataDir, "")
	c = s.client()
	rd, err := create("runc", true)
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if res := run(rd.ID, "cat /mnt/data/runc.txt"); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "written under runc" {
		t.Fatalf("reading after a restart of the service: %+v", res)
	}
	if err := c.DeleteSandbox(ctx, rd.ID); err != nil {
		t.Fatal(err)
	}
	noManagedPods(t)
	// A lease mounts it too (in a new sandbox, never a warm one), and
	// releasing the lease ends the sandbox and its hold.
	l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "code-python-basic", Runtime: "runc", RiskLevel: "low", Volumes: mount(false)})
	if err != nil {
		t.Fatalf("a lease with the volume: %v", err)
	}
	if res := run(l.SandboxID, "echo leased >> /mnt/data/runc.txt && cat /mnt/data/runc.txt"); res.ExitCode != 0 || res.Stdout != "written under runc\nleased\n" {
		t.Fatalf("writing through a lease: %+v", res)
	}
	if v, err := c.GetVolume(ctx, "data"); err != nil || len(v.Mounts) != 1 || v.Mounts[0].SandboxID != l.SandboxID || v.Mounts[0].ReadOnly {
		t.Fatalf("held by the lease's sandbox: %+v, %v", v, err)
	}
	if err := c.ReleaseLease(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the released lease's hold ends", func() (bool, string) {
		v, err := c.GetVolume(ctx, "data")
		return err == nil && len(v.Mounts) == 0, fmt.Sprint(v, err)
	})
	noManagedPods(t)

	if err := c.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetVolume(ctx, "data"); !hasCode(err, 404, "volume_not_found") {
		t.Fatalf("a deleted volume: %v", err)
	}
	eventually(t, time.Minute, "the volume's claim is removed", func() (bool, string) {
		_, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func hasCode(err error, status int, code string) bool {
	st, c := apiCode(err)
	return st == status && c == code
}
