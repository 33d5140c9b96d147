// Command genesis-egress is the egress gateway: one static process per
// service instance, run by the service in its own container, through which
// every networked sandbox reaches the network (see internal/egress/gateway
// and docs/design/egress-gateway.md).
//
// Subcommands:
//
//	genesis-egress version                         print one JSON line and exit
//	genesis-egress serve --control-socket PATH     run the gateway
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"genesis.dev/sandbox/internal/egress/gateway"
)

// version may be set at link time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: genesis-egress version | serve --control-socket PATH")
		return 2
	}
	switch args[0] {
	case "version":
		b, _ := json.Marshal(map[string]string{"version": version})
		fmt.Fprintln(stdout, string(b))
		return 0
	case "serve":
		return serve(args[1:], stderr)
	default:
		fmt.Fprintf(stderr, "genesis-egress: unknown subcommand %q\n", args[0])
		return 2
	}
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg gateway.Config
	fs.StringVar(&cfg.ControlSocket, "control-socket", "/run/genesis-egress/control.sock", "path of the control API's Unix socket")
	fs.IntVar(&cfg.Ports.DNS, "dns-port", 0, "DNS port on each sandbox address (default 53)")
	fs.IntVar(&cfg.Ports.HTTP, "http-port", 0, "plain HTTP port (default 80)")
	fs.IntVar(&cfg.Ports.TLS, "tls-port", 0, "TLS port (default 443)")
	fs.IntVar(&cfg.Ports.Proxy, "proxy-port", 0, "CONNECT proxy port (default 3128)")
	fs.IntVar(&cfg.EventCapacity, "events", 0, "events kept in memory (default 65536)")
	caFile := fs.String("upstream-ca", "", "PEM file of extra CAs trusted for https tool upstreams")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(stderr, "genesis-egress: --log-level:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintln(stderr, "genesis-egress: --upstream-ca:", err)
			return 2
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintln(stderr, "genesis-egress: --upstream-ca: no certificate found in", *caFile)
			return 2
		}
		cfg.UpstreamTLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	cfg.Version = version
	srv, err := gateway.New(cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "genesis-egress:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		log.Error("gateway stopped", "err", err)
		return 1
	}
	return 0
}
