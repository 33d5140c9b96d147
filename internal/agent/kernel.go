package agent

import "syscall"

// KernelRelease returns the kernel release as uname -r prints it; under
// gVisor that is the emulated kernel, such as "4.19.0-gvisor".
func KernelRelease() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return ""
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
