package docker

import (
	"encoding/json"
	"runtime"
	"sync"

	"github.com/moby/profiles/seccomp"
)

// nativeSeccompOpt is the security option that gives a runc container
// Docker's default seccomp profile (github.com/moby/profiles, the version
// go.mod pins) restricted to the host's native system-call ABI:
// "seccomp=<profile JSON>". The daemon resolves its capability, kernel
// and architecture conditions at start exactly as for its built-in
// profile, so the rules for the native ABI are the default profile's; the
// compatibility ABIs (32-bit x86 and x32 on amd64, 32-bit arm on arm64)
// are not in the filter at all, so none of their system calls gets
// through. That is narrower than the default, which allows the same list
// through every ABI, and it is what makes the filter cheap: runc's init
// compiles it with libseccomp on every container start, on the start
// call's path, and the 32-bit ABI (socketcall and ipc multiplexers
// included) was most of that work (docs/performance.md, "Cold create").
// A 32-bit program therefore cannot run in a runc sandbox.
//
// Empty on an architecture the profile does not name: the daemon's own
// default applies there.
var nativeSeccompOpt = sync.OnceValue(func() string {
	p := seccomp.DefaultProfile()
	p.ArchMap = nil
	switch runtime.GOARCH {
	case "amd64":
		p.Architectures = append(p.Architectures[:0], "SCMP_ARCH_X86_64")
	case "arm64":
		p.Architectures = append(p.Architectures[:0], "SCMP_ARCH_AARCH64")
	default:
		return ""
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "" // the profile is a fixed value: not reached
	}
	return "seccomp=" + string(b)
})
