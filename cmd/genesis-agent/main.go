// Command genesis-agent is the static in-sandbox agent. It is bind-mounted
// read-only at /.genesis/genesis-agent into every sandbox container.
//
// Subcommands:
//
//	genesis-agent version                 print one JSON line and exit
//	genesis-agent serve --socket PATH     run as the container's PID 1
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
)

// agentVersion is the build version reported by the agent. It may be
// overridden at link time with -ldflags "-X main.agentVersion=...".
var agentVersion = "0.1.0"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: genesis-agent version | serve --socket PATH")
		return 2
	}
	switch args[0] {
	case "version":
		return runVersion()
	default:
		fmt.Fprintf(os.Stderr, "genesis-agent: unknown subcommand %q\n", args[0])
		return 2
	}
}

type versionInfo struct {
	Agent  string `json:"agent"`
	Kernel string `json:"kernel"`
	UID    int    `json:"uid"`
}

func runVersion() int {
	b, err := json.Marshal(versionInfo{Agent: agentVersion, Kernel: kernelRelease(), UID: os.Getuid()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "genesis-agent:", err)
		return 1
	}
	b = append(b, '\n')
	if _, err := os.Stdout.Write(b); err != nil {
		return 1
	}
	return 0
}

func kernelRelease() string {
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
