package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
)

// TestVolumeFilesHelperPod: a files helper is a sandbox's Pod of the agent
// image, under runc (the default handler), hardened like sandboxes (no
// capabilities, no privilege escalation, read-only root, the sandbox user,
// no DNS, no service-account token), gated until started, with the
// volume's claim mounted at driver.VolumeFilesRoot (read-only in the Pod
// and the container for a read), the agent's one file root, and its token
// only as a SHA-256; labelled with its purpose and holder but no service
// instance; VolumeFilesHelpers lists it, CloseVolumeFiles removes it.
func TestVolumeFilesHelperPod(t *testing.T) {
	t.Parallel()
	for _, ro := range []bool{true, false} {
		d, cs := volumeDriver(t, "")
		ctx := t.Context()
		holder := "volfiles-1700000000-abc"
		if _, err := d.CreateSandbox(ctx, d.helperSpec(holder, "vol_ab12", ro)); err != nil {
			t.Fatal(err)
		}
		p, err := cs.CoreV1().Pods("sandboxes").Get(ctx, "genesis-volfiles-1700000000-abc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := p.Spec.Containers[0]
		sc := c.SecurityContext
		switch {
		case c.Image != "agent:1" || p.Spec.RuntimeClassName != nil:
			t.Fatalf("image %s, runtime class %v; want the agent image under the default (runc) handler", c.Image, p.Spec.RuntimeClassName)
		case *sc.AllowPrivilegeEscalation || *sc.Privileged || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			len(sc.Capabilities.Add) != 0 || *sc.RunAsUser != helperUID || !*sc.RunAsNonRoot:
			t.Fatalf("security context %+v", sc)
		case p.Spec.DNSPolicy != corev1.DNSNone || *p.Spec.AutomountServiceAccountToken || len(p.Spec.SchedulingGates) != 1:
			t.Fatalf("pod spec: dns %s, token %v, gates %v", p.Spec.DNSPolicy, *p.Spec.AutomountServiceAccountToken, p.Spec.SchedulingGates)
		case p.Labels[driver.LabelPurpose] != PurposeVolumeFiles || p.Labels[driver.LabelSandbox] != holder || p.Labels[driver.LabelManaged] != "true" ||
			p.Labels[driver.LabelInstance] != "":
			t.Fatalf("labels %v", p.Labels)
		}
		var claim *corev1.Volume
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].PersistentVolumeClaim != nil {
				claim = &p.Spec.Volumes[i]
			}
		}
		if claim == nil || claim.PersistentVolumeClaim.ClaimName != "genesis-vol-ab12" || claim.PersistentVolumeClaim.ReadOnly != ro {
			t.Fatalf("claim volume %+v; want genesis-vol-ab12 read-only %v", claim, ro)
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == claim.Name && m.MountPath == driver.VolumeFilesRoot && m.ReadOnly == ro
		}) {
			t.Fatalf("mounts %+v; want the claim at %s", c.VolumeMounts, driver.VolumeFilesRoot)
		}
		var env []string
		for _, e := range c.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		if !slices.Contains(env, agentproto.FileRootsEnv+"="+driver.VolumeFilesRoot) ||
			!slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, agentproto.TokenSHA256Env+"=") }) {
			t.Fatalf("env %v", env)
		}
		if l, err := d.VolumeFilesHelpers(ctx); err != nil || !slices.Equal(l, []string{holder}) {
			t.Fatalf("helpers %v, %v", l, err)
		}
		if err := d.CloseVolumeFiles(ctx, holder); err != nil {
			t.Fatal(err)
		}
		if l, err := d.VolumeFilesHelpers(ctx); err != nil || len(l) != 0 {
			t.Fatalf("helpers after close %v, %v", l, err)
		}
	}
}
