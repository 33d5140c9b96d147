package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"genesis.dev/sandbox/internal/agent"
	"genesis.dev/sandbox/internal/agent/agentproto"
)

// runVersion prints exactly one line of JSON: agent version, kernel release
// and uid. The capability probe relies on this format.
func runVersion(w io.Writer) int {
	b, err := json.Marshal(agentproto.VersionInfo{
		Agent:  agentVersion,
		Kernel: agent.KernelRelease(),
		UID:    os.Getuid(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "genesis-agent:", err)
		return 1
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return 1
	}
	return 0
}
