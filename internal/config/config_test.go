package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestDefaultsValid(t *testing.T) {
	t.Parallel()
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tool-basic", "code-python-basic", "skill-python-basic", "code-python-data", "browser-playwright", "desktop-vnc"}
	for _, n := range want {
		if _, ok := c.Profile(n); !ok {
			t.Errorf("built-in profile %s missing", n)
		}
	}
	p, _ := c.Profile("tool-basic")
	if p.Network.Mode != "none" || p.User != "1000:1000" {
		t.Errorf("tool-basic not hardened by default: %+v", p)
	}
	if c.Log.SlowRequest != 2*time.Second {
		t.Errorf("log.slow_request %v, want 2s by default", c.Log.SlowRequest)
	}
	if !c.WarmPools || len(p.Pools) != 1 || p.Pools[0].Runtime != "runc" || p.Pools[0].MinIdle != 2 || c.Store.Driver != "sqlite" {
		t.Errorf("default warm pool of tool-basic (runc, min_idle 2) or store missing: %+v %+v", p.Pools, c.Store)
	}
}

func TestLoadOverlayAndErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".yaml")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := Load(write("addr: 127.0.0.1:9999\nlimits: {max_sandboxes: 3}\ntenants: {acme: {min_risk_level: high}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9999" || c.Limits.MaxSandboxes != 3 || c.Tenants["acme"].MinRiskLevel != "high" {
		t.Fatalf("overlay not applied: %+v", c)
	}
	if c.Limits.MaxBodyBytes != 1<<20 {
		t.Fatalf("untouched default lost: %d", c.Limits.MaxBodyBytes)
	}
	bad := map[string]string{
		"limits: {max_pids: -1}\n":                                                               "limits.max_pids",
		"limits: {max_sandboxes: 0}\n":                                                           "limits.max_sandboxes",
		"bogus_key: 1\n":                                                                         "bogus_key",
		"addr: 127.0.0.1:7000\ngrpc_addr: 127.0.0.1:7000\n":                                      "grpc_addr",
		"tenants: {acme: {min_risk_level: meh}}\n":                                               "tenants.acme.min_risk_level",
		"tenants: {acme: {quotas: {max_sandboxes: -1}}}\n":                                       "tenants.acme.quotas.max_sandboxes",
		"tenants: {acme: {quotas: {max_cpu: -0.5}}}\n":                                           "tenants.acme.quotas.max_cpu",
		"tenants: {acme: {quotas: {max_memory_mb: -1}}}\n":                                       "tenants.acme.quotas.max_memory_mb",
		"tenants: {acme: {quotas: {max_leases: -2}}}\n":                                          "tenants.acme.quotas.max_leases",
		"tenants: {acme: {weight: -1}}\n":                                                        "tenants.acme.weight",
		"tenants: {acme: {approver_keys: [short]}}\n":                                            "tenants.acme.approver_keys[0]",
		"tenants: {acme: {api_keys: [0123456789abcdef0], approver_keys: [0123456789abcdef0]}}\n": "tenants.acme.approver_keys[0]",
		"admin_api_key: short\n":                                                                 "admin_api_key",
		"admin_api_key: 0123456789abcdef0\ntenants: {admin: {}}\n":                               "tenants.admin.admin",
		"audit: {retention: 0s}\n":                                                               "audit.retention",
		"intervals: {probe: -1s}\n":                                                              "intervals.probe",
		"profiles: []\n":                                                                         "profiles",
		"image_repository: Genesis\n":                                                            "image_repository",
		"image_mirror: deb.debian.org/debian\n":                                                  "image_mirror",
		"image_mirror: http://deb.debian.org/debian\nimage_mirror_trusted: true\n":               "image_mirror_trusted",
		"image_mirror_trusted: true\n":                                                           "image_mirror_trusted",
		"limits: {files: {max_upload_bytes: -1}}\n":                                              "limits.files.max_upload_bytes",
		"limits: {files: {max_files_per_call: -5}}\n":                                            "limits.files.max_files_per_call",
		"limits: {files: {max_search_timeout: -1s}}\n":                                           "limits.files.max_search_timeout",
		"limits: {files: {max_path_bytes: 5000}}\n":                                              "limits.files.max_path_bytes",
		"limits: {max_disk_mb: -1}\n":                                                            "limits.max_disk_mb",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64, disk_mb: 4}}]\n":            "profiles.x.resources.disk_mb",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, file_roots: [tmp]}]\n":     "profiles.x.file_roots[0]",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, file_roots: [/]}]\n":       "profiles.x.file_roots[0]",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, volume_roots: [mnt]}]\n":   "profiles.x.volume_roots[0]",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, volume_roots: [/mnt/]}]\n": "profiles.x.volume_roots[0]",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, network: open}]\n":         "profiles.x.network",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [lxc], resources: {cpu: 1, memory_mb: 64, pids: 64}}]\n":                         "profiles.x.allowed_runtimes",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 1, pids: 64}}]\n":                         "profiles.x.resources.memory_mb",
		"capacity: {sandboxes: -1}\n": "capacity.sandboxes",
		"mcp: {catalog: [{name: x, source: builtin, command: [a], permissions: {env_secrets: [TOKEN=nope]}}]}\n": "mcp.catalog[0].permissions.env_secrets",
		"mcp: {catalog: [{name: x, source: builtin, command: [a], pins: {echo: md5:1}}]}\n":                      "mcp.catalog[0].pins.echo",
		"skills: {max_risk_level: meh}\n":    "skills.max_risk_level",
		"capacity: {cpu: -2}\n":              "capacity.cpu",
		"capacity: {memory_mb: -2}\n":        "capacity.memory_mb",
		"capacity: {cpu_overcommit: 0}\n":    "capacity.cpu_overcommit",
		"capacity: {max_wait_seconds: -1}\n": "capacity.max_wait_seconds",
		"log: {slow_request: -1s}\n":         "log.slow_request",
	}
	pool := func(pools, lease string) string {
		return "profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, pools: " + pools + ", lease: " + lease + "}]\n"
	}
	for body, key := range map[string]string{
		pool("[{runtime: runsc, min_idle: 1, max_total: 2}]", "{}"):                                            "profiles.x.pools[0].runtime",
		pool("[{runtime: runc, min_idle: -1, max_total: 2}]", "{}"):                                            "profiles.x.pools[0].min_idle",
		pool("[{runtime: runc, min_idle: 3, max_total: 2}]", "{}"):                                             "profiles.x.pools[0].min_idle",
		pool("[{runtime: runc, min_idle: 0, max_total: 0}]", "{}"):                                             "profiles.x.pools[0].max_total",
		pool("[{runtime: runc, min_idle: 1, max_total: 2}, {runtime: runc, min_idle: 1, max_total: 2}]", "{}"): "profiles.x.pools[1].runtime",
		pool("[]", "{max_ttl_seconds: -5}"):                                                                    "profiles.x.lease.max_ttl_seconds",
		pool("[]", "{max_ttl_seconds: 999999999}"):                                                             "profiles.x.lease.max_ttl_seconds",
		pool("[]", "{default_ttl_seconds: 100, max_ttl_seconds: 50}"):                                          "profiles.x.lease.default_ttl_seconds",
		pool("[]", "{bogus: 1}"):                                                                               "bogus",
		pool("[]", "{on_release: recycle}"):                                                                    "profiles.x.lease.on_release",
		pool("[]", "{on_release: reset}"):                                                                      "profiles.x.lease.on_release",
		"store: {driver: mysql}\n":                                                                             "store.driver",
		"store: {driver: postgres}\n":                                                                          "store.dsn",
		"store: {driver: sqlite, dsn: x}\n":                                                                    "store.dsn",
		"intervals: {drain_timeout: 0s}\n":                                                                     "intervals.drain_timeout",
	} {
		bad[body] = key
	}
	// Snapshot pools: not a snapshot id; the same snapshot twice for one runtime.
	bad[pool("[{runtime: runc, min_idle: 1, max_total: 2, snapshot_id: snap_x}]", "{}")] = "profiles.x.pools[0].snapshot_id"
	bad[pool("[{runtime: runc, min_idle: 1, max_total: 2, snapshot_id: snap_0123456789abcdef}, {runtime: runc, min_idle: 1, max_total: 2, snapshot_id: snap_0123456789abcdef}]", "{}")] = "profiles.x.pools[1].snapshot_id"
	c, err = Load(write("image_mirror: http://127.0.0.1:3142/debian\nimage_mirror_trusted: true\n"))
	if err != nil || c.ImageMirror != "http://127.0.0.1:3142/debian" || !c.ImageMirrorTrusted {
		t.Fatalf("a trusted loopback mirror: %v %+v", err, c)
	}
	c, err = Load(write(pool("[{runtime: runc, min_idle: 2, max_total: 5}]", "{max_ttl_seconds: 60}")))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := c.Profile("x")
	if def, mx := c.LeaseTTL(x); def != 60 || mx != 60 || x.Pools[0].MinIdle != 2 {
		t.Errorf("lease ttl %d/%d, profile %+v; want the default capped to the profile maximum 60", def, mx, x)
	}
	// A snapshot pool beside the plain pool of the same runtime.
	c, err = Load(write(pool("[{runtime: runc, min_idle: 1, max_total: 2}, {runtime: runc, min_idle: 1, max_total: 2, snapshot_id: snap_0123456789abcdef}]", "{}")))
	if err != nil {
		t.Fatal(err)
	}
	if x, _ := c.Profile("x"); len(x.Pools) != 2 || x.Pools[1].SnapshotID != "snap_0123456789abcdef" {
		t.Errorf("a snapshot pool not read: %+v", x.Pools)
	}
	c, err = Load(write(strings.Replace(pool("[{runtime: runc, min_idle: 1, max_total: 2}]", "{on_release: reset}"), "pools:", "user: \"1000:1000\", pools:", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if x, _ := c.Profile("x"); !x.Lease.Resets() {
		t.Errorf("on_release: reset not read: %+v", x.Lease)
	}
	for _, p := range c.Profiles {
		if p.Name != "x" && p.Lease.Resets() {
			t.Errorf("built-in profile %s resets released sandboxes; built-ins destroy them", p.Name)
		}
	}
	for body, key := range bad {
		_, err := Load(write(body))
		if err == nil || !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: err %v, want invalid argument naming %s", body, err, key)
		}
	}
}

// TestFileRoots: a profile without file_roots gets the sandbox user's own
// writable places (the workspace first, /tmp, its home "~"); a profile
// may name its own roots, "~" included, but none that is, lies in or holds
// /proc, /sys, /dev or the agent's own directories.
func TestFileRoots(t *testing.T) {
	t.Parallel()
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Profile("tool-basic")
	if got := strings.Join(p.Roots(), " "); got != "/workspace /tmp ~" {
		t.Errorf("default roots %q, want /workspace /tmp ~", got)
	}
	dir := t.TempDir()
	profile := func(roots string) string {
		f := filepath.Join(dir, "c.yaml")
		body := "profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, file_roots: " + roots + "}]\n"
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, ok := range []string{"[/tmp]", `["~", /data]`, "[/workspace, /tmp, ~]", "[/home/sandbox]", "[/devel]", "[/run/other]"} {
		if _, err := Load(profile(ok)); err != nil {
			t.Errorf("file_roots %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"[/proc]", "[/proc/self/root]", "[/sys/fs]", "[/dev/shm]", "[/dev]", "[/run]", "[/run/genesis]",
		"[/run/genesis/x]", "[/.genesis]", "[/]", "[tmp]", "[/tmp/]", "[/a/../b]", "[~user]", `["/a:/b"]`} {
		if _, err := Load(profile(bad)); err == nil || !strings.Contains(err.Error(), "profiles.x.file_roots[0]") {
			t.Errorf("file_roots %s: %v, want profiles.x.file_roots[0] refused", bad, err)
		}
	}
}

func TestCapacityTotals(t *testing.T) {
	t.Parallel()
	l := Limits{MaxSandboxes: 50, MaxMemoryMB: 1024}
	for _, tc := range []struct {
		c         Capacity
		hostCPUs  int
		hostMem   int64
		cpu       float64
		mem       int64
		sandboxes int
	}{
		{Capacity{CPUOvercommit: 16, MemoryOvercommit: 2}, 2, 4000, 32, 8000, 50},
		{Capacity{Sandboxes: 4, CPU: 3, MemoryMB: 100, CPUOvercommit: 16, MemoryOvercommit: 2}, 2, 4000, 3, 100, 4},
		{Capacity{CPUOvercommit: 1, MemoryOvercommit: 1}, 0, 0, 1, 50 * 1024, 50}, // host unknown
	} {
		cpu, mem, n := tc.c.Totals(l, tc.hostCPUs, tc.hostMem)
		if cpu != tc.cpu || mem != tc.mem || n != tc.sandboxes {
			t.Errorf("%+v on %d CPUs, %d MB: %v, %d, %d; want %v, %d, %d", tc.c, tc.hostCPUs, tc.hostMem, cpu, mem, n, tc.cpu, tc.mem, tc.sandboxes)
		}
	}
	d, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if d.Capacity.CPUOvercommit <= 0 || d.Capacity.MaxWaitSeconds <= 0 {
		t.Errorf("default capacity %+v lacks overcommit or max wait", d.Capacity)
	}
}

func TestValidateReportsEveryBadKeySorted(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "bad.yaml")
	body := `addr: ""
limits: {max_pids: -1, max_sandboxes: 0}
capacity: {sandboxes: -1, cpu_overcommit: 0}
intervals: {probe: -1s, drain_timeout: 0s}
tenants:
  zeta: {weight: -1}
  alpha: {min_risk_level: meh, quotas: {max_cpu: -1}}
store: {driver: mysql}
network: {gateway: {subnet_pool: nonsense}}
profiles: [{name: x, recipe: r, allowed_runtimes: [lxc], resources: {cpu: 1, memory_mb: 1, pids: 64}}]
`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"addr", "capacity.cpu_overcommit", "capacity.sandboxes", "intervals.drain_timeout", "intervals.probe",
		"limits.max_pids", "limits.max_sandboxes", "network.gateway.subnet_pool",
		"profiles.x.allowed_runtimes", "profiles.x.resources.memory_mb",
		"profiles.x.resources.pids", // against the bad limits.max_pids
		"store.driver",
		"tenants.alpha.min_risk_level", "tenants.alpha.quotas", "tenants.zeta.weight",
	}
	var first string
	for range 5 { // map iteration order differs from run to run; the report must not
		_, err := Load(p)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("Load: %v; want ErrInvalidArgument", err)
		}
		joined, ok := err.(interface{ Unwrap() []error })
		if !ok {
			t.Fatalf("Load: %T; want a joined error", err)
		}
		errs := joined.Unwrap()
		if len(errs) != len(want) {
			t.Errorf("%d problems, want %d:\n%v", len(errs), len(want), err)
		}
		for i, e := range errs {
			if i < len(want) && !strings.HasPrefix(e.Error(), "config: "+want[i]) {
				t.Errorf("problem %d = %q; want it about %s", i, e, want[i])
			}
		}
		if first == "" {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("report changed between runs:\n%s\n---\n%s", first, err)
		}
	}
}
