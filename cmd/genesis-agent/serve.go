package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"genesis.dev/sandbox/internal/agent"
)

// runServe runs the agent until SIGTERM. The log level comes from
// GENESIS_AGENT_LOG_LEVEL (debug, info, warn, error; default info), which,
// like every GENESIS_AGENT_* variable, is not passed on to jobs.
// GENESIS_AGENT_RESET_DIRS (colon-separated) names the directories a reset
// empties when the agent does not run as a container's init (tests).
func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	socket := fs.String("socket", "/run/genesis/agent.sock", "Unix socket to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var level slog.Level
	if v := os.Getenv("GENESIS_AGENT_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintf(os.Stderr, "genesis-agent: GENESIS_AGENT_LOG_LEVEL: %v\n", err)
			return 2
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	srv, err := agent.New(agent.Config{
		SocketPath: *socket,
		Version:    agentVersion,
		Environ:    os.Environ(),
		ResetDirs:  resetDirs(),
	}, log)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	if err := srv.Run(context.Background()); err != nil {
		log.Error("agent failed", "err", err)
		return 1
	}
	return 0
}

// resetDirs reads GENESIS_AGENT_RESET_DIRS; unset or empty is nil.
func resetDirs() []string {
	v := os.Getenv("GENESIS_AGENT_RESET_DIRS")
	if v == "" {
		return nil
	}
	return filepath.SplitList(v)
}
