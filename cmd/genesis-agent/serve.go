package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"genesis.dev/sandbox/internal/agent"
	"genesis.dev/sandbox/internal/agent/agentproto"
)

// runServe runs the agent until SIGTERM. The log level comes from
// GENESIS_AGENT_LOG_LEVEL (debug, info, warn, error; default info), which,
// like every GENESIS_AGENT_* variable, is not passed on to jobs.
// GENESIS_AGENT_SPARE_REFILL_MS sets how long after a job start that took
// the last idle job shim another is started (default 50).
// GENESIS_AGENT_RESET_DIRS (colon-separated) names the directories a reset
// empties when the agent does not run as a container's init (tests).
func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	socket := fs.String("socket", "/run/genesis/agent.sock", "Unix socket to listen on")
	listen := fs.String("listen", "", "TCP address to listen on instead of the socket; connections must open with the token whose SHA-256 is in "+agentproto.TokenSHA256Env)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var tokenSum []byte
	if *listen != "" {
		var err error
		if tokenSum, err = hex.DecodeString(os.Getenv(agentproto.TokenSHA256Env)); err != nil || len(tokenSum) != sha256.Size {
			fmt.Fprintf(os.Stderr, "genesis-agent: --listen needs %s: the token's SHA-256 (%d bytes) in hex\n", agentproto.TokenSHA256Env, sha256.Size)
			return 2
		}
		*socket = ""
	}
	var level slog.Level
	if v := os.Getenv("GENESIS_AGENT_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintf(os.Stderr, "genesis-agent: GENESIS_AGENT_LOG_LEVEL: %v\n", err)
			return 2
		}
	}
	var refill time.Duration
	if v := os.Getenv("GENESIS_AGENT_SPARE_REFILL_MS"); v != "" {
		ms, err := strconv.ParseUint(v, 10, 31)
		if err != nil || ms == 0 {
			fmt.Fprintf(os.Stderr, "genesis-agent: GENESIS_AGENT_SPARE_REFILL_MS: want a positive number of milliseconds, got %q\n", v)
			return 2
		}
		refill = time.Duration(ms) * time.Millisecond
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	srv, err := agent.New(agent.Config{
		SocketPath:       *socket,
		Listen:           *listen,
		TokenSHA256:      tokenSum,
		Version:          agentVersion,
		Environ:          os.Environ(),
		ResetDirs:        resetDirs(),
		SpareRefillDelay: refill,
		IdentityFile:     identityFile(*socket),
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

// identityFile is where the agent keeps the sandbox's identity: beside its
// socket, in the run directory (none when it serves TCP).
func identityFile(socket string) string {
	if socket == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(socket), "identity")
}
