// Command spawnfloor measures, inside a sandbox container, the bare cost of
// what the agent does for an exec without the agent: a Go process starting
// a program with its output on two pipes and waiting for it, and the same
// through os/exec. BenchmarkExecFloor runs it next to the agent's exec of
// the same program, so that the agent's own share is the difference.
//
// Usage: spawnfloor ROUNDS PROGRAM. It prints one line per way:
// "NAME p50_µs p90_µs".
package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: spawnfloor ROUNDS PROGRAM")
		os.Exit(2)
	}
	rounds, err := strconv.Atoi(os.Args[1])
	if err != nil || rounds < 1 {
		fmt.Fprintln(os.Stderr, "spawnfloor: ROUNDS must be a positive number")
		os.Exit(2)
	}
	prog, err := exec.LookPath(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "spawnfloor:", err)
		os.Exit(1)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spawnfloor:", err)
		os.Exit(1)
	}
	measure("forkexec_pipes_wait4", rounds, func() error { return forkExec(prog, null) })
	measure("os_exec_run", rounds, func() error { return exec.Command(prog).Run() })
}

// forkExec starts prog in its own process group with stdout and stderr on
// pipes, waits for it and reads both pipes to their end.
func forkExec(prog string, null *os.File) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return err
	}
	defer errR.Close()
	pid, err := syscall.ForkExec(prog, []string{prog}, &syscall.ProcAttr{
		Files: []uintptr{null.Fd(), outW.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	outW.Close()
	errW.Close()
	if err != nil {
		return err
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	b := make([]byte, 512)
	for _, r := range []*os.File{outR, errR} {
		for {
			if n, _ := r.Read(b); n == 0 {
				break
			}
		}
	}
	return err
}

func measure(name string, rounds int, call func() error) {
	d := make([]time.Duration, 0, rounds)
	for i := range rounds + 10 {
		start := time.Now()
		if err := call(); err != nil {
			fmt.Fprintln(os.Stderr, "spawnfloor:", name, err)
			os.Exit(1)
		}
		if i >= 10 {
			d = append(d, time.Since(start))
		}
	}
	slices.Sort(d)
	fmt.Println(name, d[len(d)/2].Microseconds(), d[len(d)*9/10].Microseconds())
}
