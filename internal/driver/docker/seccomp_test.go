package docker_test

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/sandbox"
)

// The runc profile names the native ABI alone (no compatibility ABI, no
// architecture map the daemon would widen it with) and keeps the default
// profile's rules: everything else denied, mount and unshare only with
// CAP_SYS_ADMIN.
func TestNativeSeccompProfile(t *testing.T) {
	opt := docker.NativeSeccompOpt()
	want := map[string]string{"amd64": "SCMP_ARCH_X86_64", "arm64": "SCMP_ARCH_AARCH64"}[runtime.GOARCH]
	if want == "" {
		if opt != "" {
			t.Fatalf("option on %s = %.80q; want none", runtime.GOARCH, opt)
		}
		t.Skip("no native profile on " + runtime.GOARCH)
	}
	body, ok := strings.CutPrefix(opt, "seccomp=")
	if !ok {
		t.Fatalf("option = %.80q; want seccomp=<JSON>", opt)
	}
	var p struct {
		DefaultAction string            `json:"defaultAction"`
		Architectures []string          `json:"architectures"`
		ArchMap       []json.RawMessage `json:"archMap"`
		Syscalls      []struct {
			Names    []string `json:"names"`
			Action   string   `json:"action"`
			Includes *struct {
				Caps []string `json:"caps"`
			} `json:"includes"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("profile: %v", err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" || !slices.Equal(p.Architectures, []string{want}) || len(p.ArchMap) != 0 {
		t.Errorf("defaultAction %q architectures %v archMap %d; want SCMP_ACT_ERRNO, [%s], none", p.DefaultAction, p.Architectures, len(p.ArchMap), want)
	}
	gated := map[string]bool{}
	for _, s := range p.Syscalls {
		if s.Action == "SCMP_ACT_ALLOW" && s.Includes != nil && slices.Contains(s.Includes.Caps, "CAP_SYS_ADMIN") {
			for _, n := range s.Names {
				gated[n] = true
			}
		}
	}
	for _, n := range []string{"mount", "unshare", "setns", "bpf"} {
		if !gated[n] {
			t.Errorf("%s is not limited to CAP_SYS_ADMIN", n)
		}
	}
}

// Only runc containers carry the profile: runsc filters system calls in its
// own kernel and ignores the container's.
func TestSeccompOptionPerRuntime(t *testing.T) {
	for _, tc := range []struct {
		rt   sandbox.Runtime
		want int
	}{{sandbox.RuntimeRunc, 2}, {sandbox.RuntimeRunsc, 1}} {
		body, err := docker.BuildCreateForTest(driver.Spec{Image: "busybox:latest", Runtime: tc.rt})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(body); n != tc.want && docker.NativeSeccompOpt() != "" {
			t.Errorf("%s: %d security options; want %d", tc.rt, n, tc.want)
		}
	}
}
