package agent

import (
	"slices"
	"testing"

	"genesis.dev/sandbox/internal/mountinfo"
)

func TestResetPlaces(t *testing.T) {
	t.Parallel()
	mounts := []mountinfo.Mount{
		{Point: "/", FSType: "overlay", ReadWrite: true},
		{Point: "/proc", FSType: "proc", ReadWrite: true},
		{Point: "/proc/sys", FSType: "proc", ReadWrite: false},
		{Point: "/dev", FSType: "tmpfs", ReadWrite: true},
		{Point: "/dev/pts", FSType: "devpts", ReadWrite: true},
		{Point: "/dev/shm", FSType: "tmpfs", ReadWrite: true},
		{Point: "/sys/fs/cgroup", FSType: "cgroup2", ReadWrite: true},
		{Point: "/.genesis", FSType: "ext4", ReadWrite: false},
		{Point: "/run/genesis", FSType: "ext4", ReadWrite: true},
		{Point: "/workspace", FSType: "ext4", ReadWrite: true},
		{Point: "/data", FSType: "ext4", ReadWrite: true},
		{Point: "/etc/hosts", FSType: "ext4", ReadWrite: true}, // a file: skipped when emptying
	}
	got := resetPlaces(mounts, "/workspace", "/home/sandbox", "/run/genesis")
	want := []string{"/workspace", "/tmp", "/var/tmp", "/dev/shm", "/home/sandbox", "/data", "/etc/hosts"}
	if !slices.Equal(got, want) {
		t.Errorf("resetPlaces = %q, want %q", got, want)
	}
	if got := resetPlaces(nil, "/workspace", "/", "/run/genesis"); slices.Contains(got, "/") {
		t.Errorf("a home of / is emptied: %q", got)
	}
}
