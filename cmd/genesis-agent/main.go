// Command genesis-agent is the static in-sandbox agent. It is bind-mounted
// read-only at /.genesis/genesis-agent into every sandbox container.
//
// Subcommands:
//
//	genesis-agent version                 print one JSON line and exit
//	genesis-agent serve --socket PATH     run as the container's PID 1
//	genesis-agent serve --listen ADDR     the same, on TCP with a token (Kubernetes)
//	genesis-agent install DIR             copy this binary into DIR (an init container)
//	genesis-agent shim spare              a job shim; only the agent starts it
package main

import (
	"fmt"
	"os"

	"genesis.dev/sandbox/internal/agent"
)

// agentVersion is the build version reported by the agent. It may be
// overridden at link time with -ldflags "-X main.agentVersion=...".
var agentVersion = "0.1.0"

func main() {
	// Agents before the shim subcommand started shims as "serve spare".
	if agent.IsLegacyShim(os.Args) {
		os.Exit(agent.RunShim(os.Args))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: genesis-agent version | serve --socket PATH | serve --listen ADDR | install DIR")
		return 2
	}
	switch args[0] {
	case "version":
		return runVersion(os.Stdout)
	case "serve":
		return runServe(args[1:])
	case "install":
		return runInstall(args[1:])
	case agent.ShimCommand:
		return agent.RunShim(os.Args)
	default:
		fmt.Fprintf(os.Stderr, "genesis-agent: unknown subcommand %q\n", args[0])
		return 2
	}
}
