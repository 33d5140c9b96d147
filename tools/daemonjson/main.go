// Command daemonjson merges the runsc runtime entry into a Docker daemon.json
// without disturbing any other key. It prints "changed" when it rewrote the
// file and "unchanged" when the file already had the wanted entry.
//
// Usage: daemonjson -file /etc/docker/daemon.json -name runsc -path /usr/local/bin/runsc -arg --host-uds=create
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

type argList []string

func (a *argList) String() string     { return strings.Join(*a, ",") }
func (a *argList) Set(v string) error { *a = append(*a, v); return nil }

func main() {
	file := flag.String("file", "/etc/docker/daemon.json", "daemon.json to update")
	name := flag.String("name", "runsc", "runtime name")
	path := flag.String("path", "/usr/local/bin/runsc", "runtime binary path")
	var args argList
	flag.Var(&args, "arg", "runtime argument (repeatable)")
	flag.Parse()
	changed, err := merge(*file, *name, *path, args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemonjson:", err)
		os.Exit(1)
	}
	if changed {
		fmt.Println("changed")
	} else {
		fmt.Println("unchanged")
	}
}

func merge(file, name, path string, args []string) (bool, error) {
	doc := map[string]any{}
	old, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, err
	case len(bytes.TrimSpace(old)) > 0:
		if err := json.Unmarshal(old, &doc); err != nil {
			return false, fmt.Errorf("%s is not valid JSON, refusing to rewrite it: %w", file, err)
		}
	}
	runtimes, _ := doc["runtimes"].(map[string]any)
	if runtimes == nil {
		runtimes = map[string]any{}
	}
	want := map[string]any{"path": path}
	if len(args) > 0 {
		a := make([]any, len(args))
		for i, s := range args {
			a[i] = s
		}
		want["runtimeArgs"] = a
	}
	cur, _ := json.Marshal(runtimes[name])
	nw, _ := json.Marshal(want)
	if bytes.Equal(cur, nw) {
		return false, nil
	}
	runtimes[name] = want
	doc["runtimes"] = runtimes
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return false, err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, file)
}
