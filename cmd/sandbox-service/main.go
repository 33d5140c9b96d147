// Command sandbox-service is the Genesis Sandbox server: the HTTP API over
// Docker (runc and gVisor runsc) sandboxes, with state in SQLite.
//
//	sandbox-service [serve] [--addr A] [--data-dir D] [--api-key K] [--config F] [--build-images]
//	sandbox-service images build [--profile P]... [--force] [--repository PREFIX/]
//	sandbox-service images ls
//	sandbox-service images build-service [--tag REF]... [--force]
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	ctx := context.Background()
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "images" || args[0] == "version") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args)
	case "images":
		err = imagesCmd(ctx, args)
	case "version":
		fmt.Println("sandbox-service", version)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-service:", err)
		os.Exit(1)
	}
}

// version is set with -ldflags "-X main.version=…".
var version = "dev"
