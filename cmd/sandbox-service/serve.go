package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/compat/e2b"
	"genesis.dev/sandbox/internal/compat/opensandbox"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/console"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/httpapi"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlite"
)

type serveFlags struct {
	addr, dataDir, apiKey, adminKey, configPath, agentBinary, egressBinary, dockerHost, logLevel string

	// buildImages builds the missing profile images in the background.
	buildImages bool
}

func parseServeFlags(args []string) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("sandbox-service serve", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "", "listen address (default from config: 127.0.0.1:8080)")
	fs.StringVar(&f.dataDir, "data-dir", "", "data directory for the database, sandbox dirs and agent (default from config: ./.data)")
	fs.StringVar(&f.apiKey, "api-key", "", "API key of the default tenant (env GENESIS_API_KEY; generated and saved in the data dir if unset)")
	fs.StringVar(&f.adminKey, "admin-key", "", "key of the built-in admin tenant \"admin\", for the tenant and key API (env GENESIS_ADMIN_KEY; overrides admin_api_key in the config)")
	fs.StringVar(&f.configPath, "config", os.Getenv("GENESIS_CONFIG"), "YAML config file laid over the embedded defaults (env GENESIS_CONFIG)")
	fs.StringVar(&f.agentBinary, "agent-binary", "", "static genesis-agent binary (default: genesis-agent next to this executable)")
	fs.StringVar(&f.egressBinary, "egress-binary", "", "static genesis-egress binary of the egress gateway (default: genesis-egress next to this executable; without it networked sandbox modes are unavailable)")
	fs.StringVar(&f.dockerHost, "docker-host", "", "Docker daemon socket (default unix:///var/run/docker.sock)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&f.buildImages, "build-images", false, "build the profiles' missing images in the background, one after another in the order of the profiles, while serving (needs root and debootstrap, as sandbox-service images build)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f.apiKey == "" {
		f.apiKey = os.Getenv("GENESIS_API_KEY")
	}
	if f.adminKey == "" {
		f.adminKey = os.Getenv("GENESIS_ADMIN_KEY")
	}
	return f, nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func serve(ctx context.Context, args []string) error {
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := config.Load(f.configPath)
	if err != nil {
		return err
	}
	if f.addr != "" {
		cfg.Addr = f.addr
	}
	if f.dataDir != "" {
		cfg.DataDir = f.dataDir
	}
	if f.adminKey != "" {
		cfg.AdminAPIKey = f.adminKey
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("--admin-key / GENESIS_ADMIN_KEY: %w", err)
		}
	}
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	apiKey, generated, err := resolveAPIKey(f.apiKey, cfg.DataDir)
	if err != nil {
		return err
	}
	keys := map[string]string{apiKey: control.DefaultTenant}
	for tenant, t := range cfg.Tenants {
		for _, k := range t.APIKeys {
			keys[k] = tenant
		}
	}
	if cfg.AdminAPIKey != "" {
		keys[cfg.AdminAPIKey] = config.AdminTenant
	}
	agentDir, err := installBinary("genesis-agent", f.agentBinary, cfg.DataDir)
	if err != nil {
		return err
	}
	egressDir, err := installBinary("genesis-egress", f.egressBinary, cfg.DataDir)
	if err != nil {
		if f.egressBinary != "" {
			return err
		}
		log.Warn("networked sandbox modes are unavailable", "err", err)
		egressDir = ""
	}
	instance, err := control.InstanceID(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("instance id: %w", err)
	}

	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// Docker builds and labels the images even when the sandboxes run on
	// Kubernetes.
	dock, err := docker.New(docker.Config{Host: f.dockerHost, CallTimeout: cfg.Intervals.DockerCallTimeout, AgentDir: agentDir, Logger: log})
	if err != nil {
		return err
	}
	var drv driver.Driver = dock
	var boxes driver.Sandboxer // nil: this host's (driver/local)
	if cfg.Driver == "kubernetes" {
		kd, err := newKubeDriver(cfg, log)
		if err != nil {
			return err
		}
		drv, boxes = kd, kd
		egressDir = "" // networked modes need this host's Docker networks
	}
	metrics := httpapi.NewMetrics(httpapi.MetricsConfig{Sandboxes: st})
	var ctl *control.Service
	queue, err := imageQueue(f, cfg, dock, log, func(name string) { ctl.ImageBuilt(name) })
	if err != nil {
		return err
	}
	var builds control.ImageBuilds // stays nil (not a nil *Queue) without builds
	if queue != nil {
		builds = queue
	}
	ctl, err = control.New(control.Config{Settings: cfg, Store: st, Driver: drv, Sandboxer: boxes, AgentDir: agentDir, EgressDir: egressDir, InstanceID: instance, ImageBuilds: builds, Logger: log})
	if err != nil {
		return err
	}
	m, err := newManagers(ctl, st, cfg, agentDir, dock, metrics, log)
	if err != nil {
		return err
	}
	// The compatibility adapters' per-sandbox tokens are keyed by a file of
	// the data dir, so that they survive a restart (and instances sharing a
	// store accept each other's when they share the file).
	tokenKey, err := ports.LoadOrCreateKey(filepath.Join(cfg.DataDir, "keys", "compat-token.key"))
	if err != nil {
		return err
	}
	var e2bCfg *e2b.Config
	if cfg.E2B.Enabled {
		e2bCfg = &e2b.Config{Settings: cfg.E2B, MaxJobTimeoutMS: cfg.Limits.MaxExecTimeoutMS, TokenKey: tokenKey}
	}
	var osbCfg *opensandbox.Config
	if cfg.OpenSandbox.Enabled {
		osbCfg = &opensandbox.Config{Settings: cfg.OpenSandbox, MaxJobTimeoutMS: cfg.Limits.MaxExecTimeoutMS, TokenKey: tokenKey}
	}
	api, err := httpapi.New(httpapi.Config{Control: ctl, Terminals: m.terms, Files: m.files, Jobs: m.jobs, Artifacts: m.arts, Ports: m.ports, Browser: m.browser, Desktop: m.desktop, Trace: m.trace, Services: m.svcs, MCP: m.mcp, Skills: m.sk, Keys: keys, MaxBodyBytes: cfg.Limits.MaxBodyBytes, Logger: log, Metrics: metrics, E2B: e2bCfg, OpenSandbox: osbCfg})
	if err != nil {
		return err
	}
	if a := api.E2B(); a != nil {
		ctl.AddHook(a) // forgets the pids and code context of a sandbox that ended
	}
	if a := api.OpenSandbox(); a != nil {
		ctl.AddHook(a) // forgets the default code context of a sandbox that ended
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	if err := ctl.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	defer ctl.Close()
	defer m.jobs.Close() // before ctl.Close: followers hold busy attachments
	defer m.svcs.Close() // before the jobs: no service restarts while they close
	defer m.mcp.Close()  // before the jobs: an instance stops its server job and own lease
	if queue != nil {
		stop := runImageQueue(ctx, queue, log)
		defer stop() // first: a build in progress is stopped and cleaned up
	}

	handler := api.Handler()
	if cfg.Console.Enabled {
		handler = withConsole(handler, log)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Info("sandbox-service listening", "addr", ln.Addr().String(), "data_dir", cfg.DataDir, "instance", instance, "version", version)
	if generated {
		fmt.Fprintf(os.Stderr, "\nAPI key (saved in %s): %s\n  export GENESIS_URL=http://%s GENESIS_API_KEY=%s\n\n",
			filepath.Join(cfg.DataDir, "api_key"), apiKey, ln.Addr().String(), apiKey)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if cfg.E2B.Enabled && cfg.E2B.Listen != "" {
		hln, err := net.Listen("tcp", cfg.E2B.Listen)
		if err != nil {
			return fmt.Errorf("e2b.listen: %w", err)
		}
		hsrv := &http.Server{Handler: api.E2BHostHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		defer hsrv.Close()
		log.Info("E2B host-based listener", "addr", hln.Addr().String(), "domain", cfg.E2B.SandboxDomain, "tls", cfg.E2B.TLSCertFile != "")
		go func() {
			var err error
			if cfg.E2B.TLSCertFile != "" {
				err = hsrv.ServeTLS(hln, cfg.E2B.TLSCertFile, cfg.E2B.TLSKeyFile)
			} else {
				err = hsrv.Serve(hln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("e2b listener: %w", err)
			}
		}()
	}
	select {
	case err := <-errc:
		return err
	case sig := <-sigs:
		if sig == syscall.SIGTERM && ctl.HandsOver() {
			// Replicas on a cluster: the sandboxes stay for the leader to
			// adopt once this process (and its store lock) is gone.
			log.Info("SIGTERM: handing this instance's sandboxes over to the other replicas")
			dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err := ctl.StopTaking(dctx)
			cancel()
			if err != nil {
				log.Error("waiting for pool members being made", "err", err)
			}
		} else if sig == syscall.SIGTERM {
			// Drain while still serving, so holders can finish and release:
			// new leases and creates get 503, and at the deadline everything
			// of this instance is destroyed.
			log.Info("SIGTERM: draining", "drain_timeout", cfg.Intervals.DrainTimeout)
			dctx, cancel := context.WithTimeout(ctx, cfg.Intervals.DrainTimeout+2*time.Minute)
			err := ctl.Drain(dctx, cfg.Intervals.DrainTimeout)
			cancel()
			if err != nil {
				log.Error("drain did not finish", "err", err)
			}
		} else {
			log.Info("shutting down; sandboxes keep running and are adopted on restart", "signal", sig.String())
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openStore opens the configured state store: SQLite in the data dir, or
// PostgreSQL (shared by several service instances).
func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (store.Store, error) {
	switch cfg.Store.Driver {
	case "postgres":
		return postgres.Open(ctx, postgres.Config{DSN: cfg.Store.DSN, Logger: log})
	default:
		return sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(cfg.DataDir, "genesis.db"), Logger: log})
	}
}

// resolveAPIKey returns the given key, or the one saved in the data dir, or
// a new random key that it saves there (0600).
func resolveAPIKey(given, dataDir string) (key string, generated bool, err error) {
	if given != "" {
		if len(given) < 16 {
			return "", false, errors.New("--api-key / GENESIS_API_KEY must be at least 16 characters")
		}
		return given, false, nil
	}
	p := filepath.Join(dataDir, "api_key")
	if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) >= 16 {
		return strings.TrimSpace(string(b)), true, nil
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, err
	}
	key = "gsk_" + hex.EncodeToString(b[:])
	return key, true, os.WriteFile(p, []byte(key+"\n"), 0o600)
}

// installBinary copies a static binary (genesis-agent or genesis-egress)
// into its own directory under the data dir, so that the directory
// bind-mounted into containers holds exactly one file. src "" means the
// file of that name next to this executable.
func installBinary(name, src, dataDir string) (string, error) {
	if src == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		src = filepath.Join(filepath.Dir(exe), name)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("%s binary: %w (build it with: make build, or pass --%s-binary)", name, err, strings.TrimPrefix(name, "genesis-"))
	}
	dir := filepath.Join(dataDir, strings.TrimPrefix(name, "genesis-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, name)
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, b) {
		return dir, nil
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dst)
}

// withConsole serves the web console at /console/ beside the API. A plain
// prefix test, not a ServeMux: a mux would clean (redirect) the API's paths,
// and proxied paths into a sandbox must reach it as sent.
func withConsole(api http.Handler, log *slog.Logger) http.Handler {
	c := console.New()
	if !c.Built() {
		log.Warn("the web console's front-end is not built into this binary: /console/ says so; run make build")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, console.Prefix) || r.URL.Path+"/" == console.Prefix {
			c.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
