package docker_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
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

// tinyELF is a static x86-64 program that makes one getpid, through the
// 32-bit ABI (int 0x80, call 20) when compat is set, else through
// syscall (call 39), and exits with its result.
func tinyELF(compat bool) []byte {
	code := []byte{0xb8, 39, 0, 0, 0, 0x0f, 0x05} // mov eax, 39; syscall
	if compat {
		code = []byte{0xb8, 20, 0, 0, 0, 0xcd, 0x80} // mov eax, 20; int 0x80
	}
	code = append(code, 0x89, 0xc7, 0xb8, 60, 0, 0, 0, 0x0f, 0x05) // mov edi, eax; exit
	const base, hdr = 0x400000, 64 + 56
	le := binary.LittleEndian
	b := make([]byte, hdr, hdr+len(code))
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], 2)    // ET_EXEC
	le.PutUint16(b[18:], 0x3e) // x86-64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[24:], base+hdr) // entry
	le.PutUint64(b[32:], 64)       // program headers
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[54:], 56)
	le.PutUint16(b[56:], 1)
	p := b[64:]
	le.PutUint32(p[0:], 1) // PT_LOAD
	le.PutUint32(p[4:], 5) // R+X
	le.PutUint64(p[16:], base)
	le.PutUint64(p[24:], base)
	le.PutUint64(p[32:], uint64(hdr+len(code)))
	le.PutUint64(p[40:], uint64(hdr+len(code)))
	le.PutUint64(p[48:], 0x1000)
	return append(b, code...)
}

// octal writes b as a printf format of octal escapes.
func octal(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\%03o", c)
	}
	return s.String()
}

// Under runc a system call through the 32-bit ABI kills the process
// (SIGSYS: the shell reports 159), while the same call through the native
// ABI answers.
func TestSeccompDeniesCompatABI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the compatibility ABI checked here is amd64's")
	}
	d := testenv.Docker(t)
	if !slices.Contains(testenv.Runtimes(t, d), sandbox.RuntimeRunc) {
		t.Skip("no runc")
	}
	image := testenv.BusyboxImage(t, d)
	script := fmt.Sprintf("printf '%s' >/x/native && printf '%s' >/x/compat && chmod 755 /x/native /x/compat; "+
		"/x/native; echo native=$?; /x/compat; echo compat=$?; echo END; sleep 300", octal(tinyELF(false)), octal(tinyELF(true)))
	id := run(t, d, driver.Spec{
		Name:    "genesis-test-seccomp-" + strings.TrimPrefix(sandbox.NewID("x"), "x_"),
		Image:   image,
		Runtime: sandbox.RuntimeRunc,
		User:    "1000:1000",
		Cmd:     []string{"/bin/busybox", "sh", "-c", script},
		Tmpfs:   map[string]string{"/x": "exec,size=1m,mode=1777"},
	})
	out := logsUntil(t, d, id, "END")
	if !strings.Contains(out, "compat=159") {
		t.Errorf("a getpid through int 0x80 was not killed by SIGSYS (want compat=159):\n%s", out)
	}
	if strings.Contains(out, "native=159") || !strings.Contains(out, "native=") {
		t.Errorf("the native getpid did not answer:\n%s", out)
	}
}
