// Command genesis-runsc is the OCI runtime Docker knows as "runsc-restore":
// runsc, except that the start of a container the service restores from a
// checkpoint is a restore.
//
// Docker before API 1.43 passes no annotations, and restores a checkpoint
// only into the container that made it. The service creates a new
// container (the container id is known from then on), writes a restore
// order to {restore dir}/{container id}.json, and starts it: containerd's
// runc shim calls "runtime create …" and then "runtime start ID". This
// program passes every call to runsc unchanged, except for such a
// container: its create gets the order's root filesystem changes as
// gVisor's dev.gvisor.tar.rootfs.upper annotation, and its start becomes
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

// plan returns runsc's arguments for args: args themselves, or, for a
// container with a restore order in dir, its create with the order's
// annotations written into the bundle, and its start as a restore.
func plan(args []string, dir string) ([]string, error) {
	n := len(args)
	if n < 2 {
		return args, nil
	}
	sub, bundle := "", ""
	for i, a := range args {
		switch {
		case a == "create" || a == "start":
			if sub == "" {
				sub = a
			}
		case sub == "create" && a == "--bundle" && i+1 < n:
			bundle = args[i+1]
		case sub == "create" && strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		}
	}
	// containerd's runc shim ends both with the container id.
	id := args[n-1]
	if (sub != "create" && sub != "start") || id == "" || strings.ContainsAny(id, "/.") || strings.HasPrefix(id, "-") {
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
	if err := json.Unmarshal(b, &o); err != nil || (o.ImagePath == "" && o.RootfsUpperTar == "") {
		return nil, fmt.Errorf("restore order of %s is not valid: %q", id, b)
	}
	if sub == "create" {
		if o.RootfsUpperTar != "" {
			if bundle == "" {
				if bundle, err = os.Getwd(); err != nil {
					return nil, err
				}
			}
			if err := annotate(filepath.Join(bundle, "config.json"), rootfsUpperAnnotation, o.RootfsUpperTar); err != nil {
				return nil, err
			}
			// runsc honours the annotation only when told to.
			return append([]string{"--allow-rootfs-tar-annotation"}, args...), nil
		}
		return args, nil
	}
	if o.ImagePath == "" || args[n-2] != "start" {
		return args, nil // files only: a fresh start on them
	}
	out := append([]string{}, args[:n-2]...)
	out = append(out, "restore", "--detach", "--image-path", o.ImagePath)
	if o.Direct {
		out = append(out, "--direct")
	}
	return append(out, id), nil
}

// rootfsUpperAnnotation makes runsc lay a tar of root filesystem changes
// over the container's image at create.
const rootfsUpperAnnotation = "dev.gvisor.tar.rootfs.upper"

// annotate sets an annotation in an OCI bundle's config.json, keeping the
// rest of it as it is.
func annotate(config, key, value string) error {
	b, err := os.ReadFile(config)
	if err != nil {
		return fmt.Errorf("read the bundle's spec: %w", err)
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("the bundle's spec %s: %w", config, err)
	}
	ann := map[string]string{}
	if raw, ok := spec["annotations"]; ok {
		if err := json.Unmarshal(raw, &ann); err != nil {
			return fmt.Errorf("the bundle's annotations: %w", err)
		}
	}
	ann[key] = value
	if spec["annotations"], err = json.Marshal(ann); err != nil {
		return err
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := config + ".genesis-tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, config)
}
