package main

import (
	"testing"

	"genesis.dev/sandbox/client"
)

func TestVolumesText(t *testing.T) {
	for _, c := range []struct {
		in   client.VolumesCapability
		want string
	}{
		{client.VolumesCapability{}, "unsupported"},
		{client.VolumesCapability{Reason: "no loop devices"}, "unsupported: no loop devices"},
		{client.VolumesCapability{Supported: true, Roots: []string{"/workspace", "/mnt"}}, "supported, mounted below /workspace, /mnt"},
		{client.VolumesCapability{Supported: true, Roots: []string{"/mnt"}, MaxSizeMB: 1024}, "supported, mounted below /mnt; at most 1024 MiB each"},
	} {
		if got := volumesText(c.in); got != c.want {
			t.Errorf("volumesText(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}
