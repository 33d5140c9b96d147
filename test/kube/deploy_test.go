//go:build kube

package kube

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeployManifests: the API server accepts deploy/kubernetes as it is
// (a server-side dry run after its namespaces exist), and the service
// account it makes may do what the driver does and no more.
func TestDeployManifests(t *testing.T) {
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", state() + "/admin.kubeconfig"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := kubectl("apply", "-f", "../../deploy/kubernetes/00-namespaces.yaml", "-f", "../../deploy/kubernetes/10-rbac.yaml"); err != nil {
		t.Fatalf("namespaces and RBAC: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = kubectl("delete", "--wait=false", "-f", "../../deploy/kubernetes/10-rbac.yaml", "-f", "../../deploy/kubernetes/00-namespaces.yaml")
	})
	if out, err := kubectl("apply", "--dry-run=server", "-f", "../../deploy/kubernetes/"); err != nil {
		t.Fatalf("server-side dry run of deploy/kubernetes: %v\n%s", err, out)
	}
	sa := "--as=system:serviceaccount:genesis-system:genesis-sandbox"
	for _, c := range []struct {
		verb, resource, ns string
		want               string
	}{
		{"create", "pods", "genesis-sandboxes", "yes"},
		{"delete", "pods", "genesis-sandboxes", "yes"},
		{"patch", "pods", "genesis-sandboxes", "yes"},
		{"watch", "pods", "genesis-sandboxes", "yes"},
		{"get", "pods --subresource=log", "genesis-sandboxes", "yes"},
		{"get", "runtimeclasses.node.k8s.io", "", "yes"},
		{"create", "persistentvolumeclaims", "genesis-sandboxes", "yes"},
		{"delete", "persistentvolumeclaims", "genesis-sandboxes", "yes"},
		{"list", "storageclasses.storage.k8s.io", "", "yes"},
		{"create", "persistentvolumeclaims", "default", "no"},
		{"create", "persistentvolumes", "", "no"},
		{"create", "pods", "default", "no"},
		{"create", "pods --subresource=exec", "genesis-sandboxes", "no"},
		{"create", "pods --subresource=portforward", "genesis-sandboxes", "no"},
		{"get", "secrets", "genesis-sandboxes", "no"},
		{"create", "deployments.apps", "genesis-sandboxes", "no"},
		{"delete", "nodes", "", "no"},
	} {
		args := append([]string{"auth", "can-i", c.verb}, strings.Fields(c.resource)...)
		args = append(args, sa)
		if c.ns != "" {
			args = append(args, "-n", c.ns)
		}
		out, _ := kubectl(args...)
		lines := strings.Split(strings.TrimSpace(out), "\n") // warnings come first
		if got := lines[len(lines)-1]; got != c.want {
			t.Errorf("service account can-i %s %s in %q = %q; want %q", c.verb, c.resource, c.ns, got, c.want)
		}
	}
}
