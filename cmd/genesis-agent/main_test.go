package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"genesis.dev/sandbox/internal/agent"
	"genesis.dev/sandbox/internal/agent/agentproto"
)

func TestVersionPrintsOneJSONLine(t *testing.T) {
	var out bytes.Buffer
	if code := runVersion(&out); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	line := out.Bytes()
	if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
		t.Fatalf("output %q is not exactly one line", line)
	}
	var v agentproto.VersionInfo
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", line, err)
	}
	if v.Agent != agentVersion || v.Kernel == "" || v.Kernel != agent.KernelRelease() || v.UID != os.Getuid() {
		t.Fatalf("version info %+v", v)
	}
}

func TestUnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"serve", "--no-such-flag"}} {
		if code := run(args); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
}
