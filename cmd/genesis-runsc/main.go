// Command genesis-runsc is the OCI runtime Docker knows as "runsc-restore":
// runsc, except that the start of a container the service restores from a
// checkpoint is a restore.
//
// Docker before API 1.43 passes no annotations, and restores a checkpoint
// only into the container that made it. The service creates a new
// container (the container id is known from then on), writes a restore
// order to {restore dir}/{container id}.json, and starts it: containerd's
// runc shim calls "runtime create …" and then "runtime start ID". This
// program passes every call to runsc unchanged, but turns that start into
// "runsc restore --detach --image-path DIR ID", which restores into the
// container runsc create made. Nothing of the order is visible inside the
// sandbox.
//
// Its own flags come first in the runtime's arguments (daemon.json
// runtimeArgs) and are not passed on:
//
//	--genesis-runsc=PATH        the runsc binary (default: runsc on PATH)
//	--genesis-restore-dir=DIR   where restore orders are (default /run/genesis/restore)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"genesis.dev/sandbox/internal/driver"
)

func main() {
	runsc, dir, args := ownFlags(os.Args[1:])
	if p, err := exec.LookPath(runsc); err == nil {
		runsc = p
	}
	argv, err := plan(args, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genesis-runsc:", err)
		os.Exit(1)
	}
	err = syscall.Exec(runsc, append([]string{runsc}, argv...), os.Environ())
	fmt.Fprintf(os.Stderr, "genesis-runsc: exec %s: %v\n", runsc, err)
	os.Exit(1)
}

// ownFlags takes this program's flags off the front of args.
func ownFlags(args []string) (runsc, dir string, rest []string) {
	runsc, dir = "runsc", driver.RestoreOrderDir
	for len(args) > 0 {
		if v, ok := strings.CutPrefix(args[0], "--genesis-runsc="); ok {
			runsc = v
		} else if v, ok := strings.CutPrefix(args[0], "--genesis-restore-dir="); ok {
			dir = v
		} else {
			break
		}
		args = args[1:]
	}
	return runsc, dir, args
}

// plan returns runsc's arguments for args: args themselves, or, for the
// start of a container with a restore order in dir, its restore.
func plan(args []string, dir string) ([]string, error) {
	n := len(args)
	// containerd's runc shim: "[global flags] start ID", nothing after.
	if n < 2 || args[n-2] != "start" {
		return args, nil
	}
	id := args[n-1]
	if id == "" || strings.ContainsAny(id, "/.") {
		return args, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if os.IsNotExist(err) {
		return args, nil
	}
	if err != nil {
		return nil, fmt.Errorf("restore order of %s: %w", id, err)
	}
	var o driver.RestoreOrder
	if err := json.Unmarshal(b, &o); err != nil || o.ImagePath == "" {
		return nil, fmt.Errorf("restore order of %s is not valid: %q", id, b)
	}
	out := append([]string{}, args[:n-2]...)
	out = append(out, "restore", "--detach", "--image-path", o.ImagePath)
	if o.Direct {
		out = append(out, "--direct")
	}
	return append(out, id), nil
}
