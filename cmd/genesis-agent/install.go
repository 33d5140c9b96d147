package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// runInstall copies this binary into a directory as genesis-agent: how a
// Kubernetes init container puts the agent into a volume its sandbox's
// container then runs it from, without a registry image of the agent's own.
func runInstall(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: genesis-agent install DIR")
		return 2
	}
	if err := install(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "genesis-agent install: %v\n", err)
		return 1
	}
	return 0
}

func install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".genesis-agent-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, "genesis-agent"))
}
