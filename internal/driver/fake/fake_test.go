package fake_test

import (
	"context"
	"testing"

	"genesis.dev/sandbox/internal/driver/drivertest"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/sandbox"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := fake.New(fake.Config{Images: []string{"busybox:test"}})
		return drivertest.Harness{
			Driver:      d,
			Image:       "busybox:test",
			Runtimes:    []sandbox.Runtime{sandbox.RuntimeRunc, sandbox.RuntimeRunsc},
			Cmd:         []string{"/bin/busybox", "sleep", "300"},
			RemoveImage: func(_ context.Context, ref string) error { d.RemoveImage(ref); return nil },
		}
	})
}

func TestNetworkConformance(t *testing.T) {
	drivertest.RunNetworks(t, func(t *testing.T) drivertest.Harness {
		d := fake.New(fake.Config{Images: []string{"busybox:test"}})
		return drivertest.Harness{
			Driver:   d,
			Image:    "busybox:test",
			Runtimes: []sandbox.Runtime{sandbox.RuntimeRunc, sandbox.RuntimeRunsc},
			Cmd:      []string{"/bin/busybox", "sleep", "300"},
		}
	}, "10.231.7.0/28")
}
