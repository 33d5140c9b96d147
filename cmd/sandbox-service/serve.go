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
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/auth"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/console"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/grpcedge"
	"genesis.dev/sandbox/internal/httpapi"
	"genesis.dev/sandbox/internal/slowlog"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

type serveFlags struct {
	addr, grpcAddr, dataDir, apiKey, adminKey, adminKeyFile, configPath, agentBinary, egressBinary, dockerHost, logLevel string

	// buildImages builds the missing profile images in the background.
	buildImages bool
}

func parseServeFlags(args []string) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("sandbox-service serve", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "", "listen address (default from config: 127.0.0.1:8080)")
	fs.StringVar(&f.grpcAddr, "grpc-addr", os.Getenv("GENESIS_GRPC_ADDR"), "listen address of the native gRPC listener, gRPC only and faster per call than --addr, which serves gRPC too (env GENESIS_GRPC_ADDR; default from config: none)")
	fs.StringVar(&f.dataDir, "data-dir", "", "data directory for the database, sandbox dirs and agent (default from config: ./.data)")
	fs.StringVar(&f.apiKey, "api-key", "", "API key of the default tenant (env GENESIS_API_KEY; generated and saved in the data dir if unset)")
	fs.StringVar(&f.adminKey, "admin-key", "", "key of the built-in admin tenant \"admin\", for the tenant and key API (env GENESIS_ADMIN_KEY; overrides admin_api_key in the config)")
	fs.StringVar(&f.adminKeyFile, "admin-key-file", "", "read the admin key from this file, made (random, mode 0600) when missing; make run passes .data/admin_key (--admin-key wins)")
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
	if f.grpcAddr != "" {
		cfg.GRPCAddr = f.grpcAddr
	}
	if f.dataDir != "" {
		cfg.DataDir = f.dataDir
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
	adminKeyFile := ""
	switch {
	case f.adminKey != "":
		if len(f.adminKey) < 16 {
			return errors.New("--admin-key / GENESIS_ADMIN_KEY must be at least 16 characters")
		}
		cfg.AdminAPIKey = f.adminKey
	case f.adminKeyFile != "":
		if cfg.AdminAPIKey, err = loadOrMakeKey(f.adminKeyFile, "gsk_admin_"); err != nil {
			return fmt.Errorf("--admin-key-file: %w", err)
		}
		adminKeyFile, _ = filepath.Abs(f.adminKeyFile)
	}
	if f.adminKey != "" || adminKeyFile != "" {
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("the admin key: %w", err)
		}
	}
	keys, approvers := map[string]string{apiKey: tenancy.DefaultTenant}, map[string]string{}
	for tenant, t := range cfg.Tenants {
		for _, k := range t.APIKeys {
			keys[k] = tenant
		}
		for _, k := range t.ApproverKeys {
			approvers[k] = tenant
		}
	}
	if cfg.AdminAPIKey != "" {
		keys[cfg.AdminAPIKey] = config.AdminTenant
	}
	for k, tenant := range approvers {
		if _, dup := keys[k]; dup {
			return fmt.Errorf("tenants.%s.approver_keys: a key is also an API key without the approve scope (api_keys, admin_api_key or --api-key)", tenant)
		}
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
	dcfg := docker.Config{Host: f.dockerHost, CallTimeout: cfg.Intervals.DockerCallTimeout, AgentDir: agentDir, Logger: log}
	if cfg.Driver != "kubernetes" { // Pods mount nothing of this host
		if dcfg.Self, err = findSelf(ctx, dcfg, cfg.DataDir, log); err != nil {
			return err
		}
	}
	dock, err := docker.New(dcfg)
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
	metrics := httpapi.NewMetrics(httpapi.MetricsConfig{Sandboxes: st, TenantLabels: cfg.Metrics.TenantLabels})
	configKeys := tenant.ConfigKeyIDs(keys)
	maps.Copy(configKeys, tenant.ConfigKeyIDs(approvers))
	var stack *assemble.Stack
	queue, err := imageQueue(f, cfg, dock, log, func(name string) { stack.Control.ImageBuilt(name) })
	if err != nil {
		return err
	}
	var builds control.ImageBuilds // stays nil (not a nil *Queue) without builds
	if queue != nil {
		builds = queue
	}
	stack, err = assemble.Build(ctx, assemble.Config{Settings: cfg, Store: st, Driver: drv, Sandboxer: boxes, Images: dock, ImageBuilds: builds,
		AgentDir: agentDir, EgressDir: egressDir, InstanceID: instance, ConfigKeys: configKeys, Metrics: metrics, Logger: log})
	if err != nil {
		return err
	}
	defer stack.Close() // after the drain and the listeners: every part, in reverse build order
	slow, err := slowlog.New(slowlog.Config{Threshold: cfg.Log.SlowRequest, Logger: log, Counted: metrics.ObserveSlowRequest})
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{PublicURL: cfg.PublicBaseURL(), Previews: stack.Previews, Control: stack.Control, Tenancy: stack.Tenancy, Terminals: stack.Terminals,
		Files: stack.Files, Jobs: stack.Jobs, Artifacts: stack.Artifacts, Ports: stack.Ports, Browser: stack.Browser, Desktop: stack.Desktop,
		Trace: stack.Trace, Services: stack.Services, Snapshots: stack.Snapshots, Changes: stack.Changes, Volumes: stack.Volumes, MCP: stack.MCP, Skills: stack.Skills, MCPServe: stack.MCPServe, E2B: stack.E2B, OpenSandbox: stack.OpenSandbox,
		Keys: keys, ApproverKeys: approvers, MaxBodyBytes: cfg.Limits.MaxBodyBytes, Logger: log, Metrics: metrics,
		ServerTiming: os.Getenv(serverTimingEnv) == "1", SlowLog: slow, ExecTimeout: time.Duration(cfg.Limits.DefaultExecTimeoutMS) * time.Millisecond})
	if err != nil {
		return err
	}
	if addr := os.Getenv(pprofEnv); addr != "" {
		_, stop, err := startPprof(addr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	var gln net.Listener
	if cfg.GRPCAddr != "" {
		if gln, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			ln.Close()
			return fmt.Errorf("grpc_addr: %w", err)
		}
		defer gln.Close() // closed by its server once served
	}
	if err := stack.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	if queue != nil {
		stop := runImageQueue(ctx, queue, log)
		defer stop() // before the stack closes: a build in progress is stopped and cleaned up
	}

	// The gRPC edge checks keys with internal/auth over the same keys as
	// the HTTP API, never through the HTTP server.
	keyAuth, err := auth.New(auth.Config{Tenants: stack.Tenancy, Keys: keys, ApproverKeys: approvers, Logger: log})
	if err != nil {
		return err
	}
	edge, err := grpcedge.New(grpcedge.Config{Control: stack.Control, Jobs: stack.Jobs, Tenancy: stack.Tenancy, Auth: keyAuth,
		MaxMessageBytes: int(min(cfg.Limits.MaxBodyBytes, 64<<20)), Logger: log, Metrics: metrics,
		SlowLog: slow, ExecTimeout: time.Duration(cfg.Limits.DefaultExecTimeoutMS) * time.Millisecond,
		PublicURL: cfg.PublicBaseURL(),
		Workloads: grpcedge.Workloads{Files: stack.Files, Artifacts: stack.Artifacts, Snapshots: stack.Snapshots, Services: stack.Services}})
	if err != nil {
		return err
	}
	handler := api.Handler()
	if cfg.Console.Enabled {
		handler = withConsole(handler, api.IsPreviewHost, log)
	}
	// gRPC, gRPC-Web and Connect share the API's listener: HTTP/1.1 and
	// HTTP/2 in cleartext (h2c, as gRPC clients speak it without TLS).
	handler = edge.Route(handler, api.IsPreviewHost)
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: handler, Protocols: protocols, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Info("sandbox-service listening", "addr", ln.Addr().String(), "public_url", cfg.PublicBaseURL(), "previews", cfg.PreviewTemplate(),
		"data_dir", cfg.DataDir, "instance", instance, "version", version)
	if cfg.PublicURL == "" && !loopbackAddr(ln.Addr()) {
		log.Warn("listening beyond loopback without public_url: the URLs the service hands back (preview links, endpoints) use " +
			cfg.PublicBaseURL() + "; set public_url (and ports.preview_url) to the names callers reach")
	}
	fmt.Fprint(os.Stderr, banner(bannerInfo{
		url: bannerURL(cfg, ln.Addr()), console: cfg.Console.Enabled, apiKey: apiKey, generated: generated,
		apiKeyFile: filepath.Join(cfg.DataDir, "api_key"), admin: cfg.AdminAPIKey != "", adminKeyFile: adminKeyFile,
	}))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	errc := make(chan error, 4)
	go func() { errc <- srv.Serve(ln) }()
	var gsrv *grpc.Server
	if gln != nil {
		// gRPC alone on grpc-go's own transport, into the same handlers:
		// a small call costs less there than over net/http's HTTP/2.
		gsrv = edge.NativeServer()
		defer gsrv.Stop()
		log.Info("gRPC listener", "addr", gln.Addr().String())
		go func() {
			if err := gsrv.Serve(gln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("grpc listener: %w", err)
			}
		}()
	}
	if cfg.Ports.PreviewListen != "" {
		pln, err := net.Listen("tcp", cfg.Ports.PreviewListen)
		if err != nil {
			return fmt.Errorf("ports.preview_listen: %w", err)
		}
		psrv := &http.Server{Handler: api.PreviewHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		defer psrv.Close()
		log.Info("preview listener", "addr", pln.Addr().String(), "previews", cfg.PreviewTemplate())
		go func() {
			if err := psrv.Serve(pln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("preview listener: %w", err)
			}
		}()
	}
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
	// SIGTERM and SIGINT (Ctrl-C) both drain (or hand over); a second
	// signal cuts that short: what is left of this instance keeps running
	// and is adopted on the next start.
	stopping, force := context.WithCancel(ctx)
	defer force()
	select {
	case err := <-errc:
		return err
	case sig := <-sigs:
		go func() {
			select {
			case sig := <-sigs:
				log.Warn("second signal: stopping now; the sandboxes left keep running and are adopted on the next start", "signal", sig.String())
				force()
			case <-stopping.Done():
			}
		}()
		// Drain while still serving, so holders can finish and release:
		// new leases and creates get 503, and at the deadline everything
		// of this instance is destroyed (replicas on a cluster hand their
		// sandboxes over instead, for the leader to adopt once this
		// process and its store lock are gone).
		log.Info("stopping; a second signal stops at once", "signal", sig.String(), "drain_timeout", cfg.Intervals.DrainTimeout)
		if err := stack.Drain(stopping); err != nil {
			log.Error("drain did not finish", "err", err)
		}
	}
	if stopping.Err() != nil { // forced: no wait for open connections either
		return srv.Close() // and gsrv.Stop, deferred
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if gsrv != nil { // its calls may end until the same deadline; Stop cuts what is left
		done := make(chan struct{})
		go func() { gsrv.GracefulStop(); close(done) }()
		defer func() {
			select {
			case <-done:
			case <-sctx.Done():
				gsrv.Stop()
			}
		}()
	}
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
	key, err = loadOrMakeKey(filepath.Join(dataDir, "api_key"), "gsk_")
	return key, true, err
}

// loadOrMakeKey returns the key saved in the file p, or a new random key
// (prefix and 48 hex digits) that it saves there, readable by its owner
// only (0600).
func loadOrMakeKey(p, prefix string) (string, error) {
	if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) >= 16 {
		return strings.TrimSpace(string(b)), nil
	} else if err == nil {
		return "", fmt.Errorf("%s holds no key of at least 16 characters", p)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	key := prefix + hex.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		return "", err
	}
	return key, os.Chmod(p, 0o600) // the umask may have narrowed it; never widen
}

// bannerURL is the service's URL as the banner shows it: the configured
// public URL, else the address it listens on (a wildcard address as
// 127.0.0.1).
func bannerURL(cfg *config.Config, addr net.Addr) string {
	if cfg.PublicURL != "" {
		return cfg.PublicBaseURL()
	}
	return "http://" + reachableAddr(addr)
}

// bannerInfo is what the start-up banner tells.
type bannerInfo struct {
	url        string // the service's address
	console    bool   // the web console is served
	apiKey     string
	generated  bool   // apiKey was generated or read from apiKeyFile (not given)
	apiKeyFile string // where a generated API key is kept
	admin      bool   // an admin key is set
	// adminKeyFile is where the admin key is kept ("" when it was given
	// with --admin-key or in the config).
	adminKeyFile string
}

// banner is the start-up text on stderr: where the API and the console
// are, how to point the CLI at them, and where the keys are.
func banner(b bannerInfo) string {
	var w strings.Builder
	fmt.Fprintf(&w, "\nGenesis Sandbox serves on %s\n", b.url)
	if b.console {
		fmt.Fprintf(&w, "  console:   %s/console/ (sign in with an API key)\n", b.url)
	}
	if b.generated {
		fmt.Fprintf(&w, "  API key:   %s (kept in %s)\n", b.apiKey, b.apiKeyFile)
	} else {
		fmt.Fprintf(&w, "  API key:   the one given with --api-key or GENESIS_API_KEY\n")
	}
	switch {
	case b.adminKeyFile != "":
		fmt.Fprintf(&w, "  admin key: kept in %s; it manages tenants and keys and acts for any tenant:\n", b.adminKeyFile)
		fmt.Fprintf(&w, "             GENESIS_API_KEY=$(cat %s) genesis tenant ls\n", b.adminKeyFile)
	case b.admin:
		fmt.Fprintf(&w, "  admin key: the one given with --admin-key, GENESIS_ADMIN_KEY or the config\n")
	default:
		fmt.Fprintf(&w, "  admin key: none; start with --admin-key-file FILE (make run keeps one in .data/admin_key) to have one\n")
	}
	key := b.apiKey
	if !b.generated {
		key = "<your key>"
	}
	fmt.Fprintf(&w, "\n  export GENESIS_URL=%s GENESIS_API_KEY=%s\n\n", b.url, key)
	return w.String()
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
// withConsole serves the console under console.Prefix on the API's hosts;
// a preview host (isPreview) never serves it: a sandbox's page there must
// not share an origin with the console.
func withConsole(api http.Handler, isPreview func(*http.Request) bool, log *slog.Logger) http.Handler {
	c := console.New()
	if !c.Built() {
		log.Warn("the web console's front-end is not built into this binary: /console/ says so; run make build")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !isPreview(r) {
			// A person who opens the service's address finds the console.
			http.Redirect(w, r, console.Prefix, http.StatusFound)
			return
		}
		if (strings.HasPrefix(r.URL.Path, console.Prefix) || r.URL.Path+"/" == console.Prefix) && !isPreview(r) {
			c.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// loopbackAddr reports whether a listener's address is a loopback one.
func loopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
