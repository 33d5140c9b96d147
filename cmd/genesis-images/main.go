// Command genesis-images builds the profile images: what `sandbox-service
// images` does, without the service, so it compiles in seconds. make run
// builds the quickstart's images with it while the service compiles.
//
//	genesis-images build [--profile P]... [--force] [--config F] [--repository PREFIX/]
//	genesis-images ls [--config F]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"genesis.dev/sandbox/internal/imagecli"
)

func main() {
	// Ctrl-C stops the build in progress, which then cleans up after itself.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := imagecli.Run(ctx, "genesis-images", os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genesis-images:", err)
		os.Exit(1)
	}
}
