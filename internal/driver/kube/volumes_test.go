package kube

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func volumeDriver(t *testing.T, class string, objs ...runtime.Object) (*Driver, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	d, err := NewWithClient(Config{Namespace: "sandboxes", AgentImage: "agent:1", TokenKey: make([]byte, 32),
		RuntimeClasses: map[sandbox.Runtime]string{sandbox.RuntimeRunc: ""}, StorageClass: class}, cs)
	if err != nil {
		t.Fatal(err)
	}
	return d, cs
}

func storageClass(name string, isDefault bool) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/disk"}
	if isDefault {
		c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return c
}

// TestVolumeClass: claims name the configured class when the cluster has
// it, else the cluster's default; with neither volumes are unavailable
// (and a create says why, as 501 volumes_unavailable) rather than claims
// that never bind.
func TestVolumeClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, configured string
		classes          []runtime.Object
		want             string // "": unavailable
	}{
		{"the default", "", []runtime.Object{storageClass("slow", false), storageClass("fast", true)}, "fast"},
		{"the configured one", "slow", []runtime.Object{storageClass("slow", false), storageClass("fast", true)}, "slow"},
		{"no default", "", []runtime.Object{storageClass("slow", false)}, ""},
		{"configured but missing", "gold", []runtime.Object{storageClass("fast", true)}, ""},
		{"none at all", "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, cs := volumeDriver(t, tc.configured, tc.classes...)
			ok, why := d.VolumesAvailable(t.Context())
			if ok != (tc.want != "") || (!ok && why == "") {
				t.Fatalf("VolumesAvailable = %v, %q", ok, why)
			}
			err := d.CreateVolume(t.Context(), driver.VolumeSpec{ID: "vol_ab12", Tenant: "t1", Name: "cache", SizeMB: 512})
			if tc.want == "" {
				if errdefs.Code(err) != "volumes_unavailable" || !errors.Is(err, errdefs.ErrNotImplemented) {
					t.Fatalf("create without a class: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pvc, err := cs.CoreV1().PersistentVolumeClaims("sandboxes").Get(t.Context(), "genesis-vol-ab12", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			if *pvc.Spec.StorageClassName != tc.want || size.Value() != 512<<20 ||
				pvc.Labels[labelVolume] != "vol_ab12" || pvc.Labels[labelTenant] != "t1" || pvc.Labels[labelVolumeName] != "cache" ||
				len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
				t.Fatalf("claim %+v", pvc)
			}
			// A retry succeeds; a delete removes the claim; a second
			// delete finds nothing and succeeds too.
			if err := d.CreateVolume(t.Context(), driver.VolumeSpec{ID: "vol_ab12", Tenant: "t1", Name: "cache", SizeMB: 512}); err != nil {
				t.Fatalf("retried create: %v", err)
			}
			for range 2 {
				if err := d.RemoveVolume(t.Context(), "vol_ab12"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cs.CoreV1().PersistentVolumeClaims("sandboxes").Get(t.Context(), "genesis-vol-ab12", metav1.GetOptions{}); err == nil {
				t.Fatal("the claim outlived its volume")
			}
		})
	}
}

// TestVolumeMounts: a provisioned volume becomes the Pod's claim volume
// and the container's mount, read-only where asked; a host bind mount is
// refused, never dropped.
func TestVolumeMounts(t *testing.T) {
	t.Parallel()
	d, _ := volumeDriver(t, "")
	pod, err := d.pod(driver.Spec{Name: "sb", Image: "img", Mounts: []driver.Mount{
		{Volume: "vol_w", Target: "/mnt/w"}, {Volume: "vol_r", Target: "/workspace/r", ReadOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		byName[v.Name] = v
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		v, ok := byName[m.Name]
		if !ok || v.PersistentVolumeClaim == nil {
			t.Fatalf("mount %+v has no claim volume", m)
		}
		want := map[string]struct {
			claim string
			ro    bool
		}{"/mnt/w": {"genesis-vol-w", false}, "/workspace/r": {"genesis-vol-r", true}}[m.MountPath]
		if v.PersistentVolumeClaim.ClaimName != want.claim || m.ReadOnly != want.ro || v.PersistentVolumeClaim.ReadOnly != want.ro {
			t.Errorf("mount %+v of %+v, want claim %s read-only %v", m, v.PersistentVolumeClaim, want.claim, want.ro)
		}
	}
	if n := len(pod.Spec.Containers[0].VolumeMounts); n != 2 {
		t.Fatalf("%d mounts, want 2", n)
	}
	if _, err := d.pod(driver.Spec{Name: "sb", Image: "img", Mounts: []driver.Mount{{Source: "/etc", Target: "/mnt/etc"}}}); !errors.Is(err, errdefs.ErrNotImplemented) {
		t.Fatalf("a host bind mount: %v, want not implemented", err)
	}
}

// TestRemoveSandboxStopsClaimHolders: a sandbox Pod that mounts a claim
// is deleted with grace (stopped, its end awaited) before it is removed
// at once; one without claims is removed at once only. Its volumes' holds
// are released when RemoveSandbox returns, so the next writer never
// overlaps its processes.
func TestRemoveSandboxStopsClaimHolders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		mounts    []driver.Mount
		wantGrace []int64 // the grace periods of the deletes, in order
	}{
		// The fake clientset honours no finalizer: the graceful delete
		// removes the Pod, and nothing is left to remove at once.
		{"with a claim", []driver.Mount{{Volume: "vol_w", Target: "/mnt/w"}}, []int64{1}},
		{"without", nil, []int64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, cs := volumeDriver(t, "")
			pod, err := d.pod(driver.Spec{Name: podName("sb_1"), Image: "img", Mounts: tc.mounts})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().Pods("sandboxes").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cs.ClearActions()
			if err := d.RemoveSandbox(t.Context(), "sb_1", ""); err != nil {
				t.Fatal(err)
			}
			var grace []int64
			for _, a := range cs.Actions() {
				if del, ok := a.(interface{ GetDeleteOptions() metav1.DeleteOptions }); ok && a.GetVerb() == "delete" {
					grace = append(grace, *del.GetDeleteOptions().GracePeriodSeconds)
				}
			}
			if !slices.Equal(grace, tc.wantGrace) {
				t.Fatalf("deletes with grace %v, want %v", grace, tc.wantGrace)
			}
			if err := d.RemoveSandbox(t.Context(), "sb_1", ""); err != nil {
				t.Fatalf("removing a gone sandbox: %v", err)
			}
		})
	}
}
