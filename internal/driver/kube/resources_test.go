package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"genesis.dev/sandbox/internal/sandbox"
)

// TestInstallResources: the install container never raises a Pod's
// scheduling request above its sandbox container's, and keeps a Pod whose
// requests equal its limits Guaranteed.
func TestInstallResources(t *testing.T) {
	for _, tc := range []struct {
		name        string
		res         sandbox.Resources
		ratio       float64
		cpu, memory string // the install container's requests
		guaranteed  bool
	}{
		{"small requests", sandbox.Resources{CPU: 0.5, MemoryMB: 256}, 0.01, "5m", "2684354", false},
		{"guaranteed", sandbox.Resources{CPU: 0.5, MemoryMB: 256}, 1, "100m", "64Mi", true},
		{"no limits", sandbox.Resources{}, 1, "1m", "1Mi", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := resources(tc.res, tc.ratio)
			if err != nil {
				t.Fatal(err)
			}
			in := installResources(sc.Requests)
			if got := in.Requests.Cpu().String(); got != tc.cpu {
				t.Errorf("install CPU request %s; want %s", got, tc.cpu)
			}
			if got := in.Requests.Memory().String(); got != tc.memory {
				t.Errorf("install memory request %s; want %s", got, tc.memory)
			}
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				r, l := in.Requests[name], in.Limits[name]
				if r.Cmp(l) > 0 {
					t.Errorf("%s: request %s above limit %s", name, r.String(), l.String())
				}
				if q, ok := sc.Requests[name]; ok && r.Cmp(q) > 0 {
					t.Errorf("%s: install request %s above the sandbox's %s", name, r.String(), q.String())
				}
				if tc.guaranteed && r.Cmp(l) != 0 {
					t.Errorf("%s: request %s ≠ limit %s in a Guaranteed Pod", name, r.String(), l.String())
				}
			}
		})
	}
}
