package netctl_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/netctl"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
)

const instance = "gs-test"

// env is a Networks over the fake driver and a real SQLite store.
type env struct {
	net *netctl.Networks
	drv *fake.Driver
	st  store.Store
	cfg *config.Config
}

func newEnv(t *testing.T, tune func(*netctl.Config)) *env {
	t.Helper()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	drv := fake.New(fake.Config{})
	c := netctl.Config{Settings: cfg, Driver: drv, Store: st, InstanceID: instance, EgressDir: t.TempDir(),
		ProfileImage: func(p *config.Profile) (string, bool) { return "img-" + p.Name, true }}
	if tune != nil {
		tune(&c)
	}
	n, err := netctl.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return &env{net: n, drv: drv, st: st, cfg: cfg}
}

// sandbox stores a sandbox record and, when pol is networked, its network
// record with status.
func (e *env) sandbox(t *testing.T, id string, pol egress.Policy, status sandbox.NetworkStatus) *sandbox.Sandbox {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	sb := &sandbox.Sandbox{ID: id, Tenant: "a", State: sandbox.StateReady, CreatedAt: now, UpdatedAt: now}
	if err := e.st.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := e.net.Record(ctx, sb, pol); err != nil {
		t.Fatal(err)
	}
	if pol.Mode.Networked() && status != sandbox.NetworkPending {
		if _, err := e.st.UpdateSandboxNetwork(ctx, id, 0, now, func(n *sandbox.Network) error {
			n.Status, n.GatewayIP = status, "10.231.0.2"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return sb
}

// network makes a sandbox network as Prepare labels it.
func (e *env) network(t *testing.T, inst, sandboxID, subnet string) string {
	t.Helper()
	name := "genesis-net-" + sandboxID
	if _, err := e.drv.CreateNetwork(t.Context(), driver.NetworkSpec{Name: name, Internal: true, Subnet: subnet,
		Labels: map[string]string{driver.LabelInstance: inst, driver.LabelSandbox: sandboxID, driver.LabelPurpose: driver.PurposeSandboxNetwork}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func (e *env) hasNetwork(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.drv.InspectNetwork(t.Context(), name)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

var allow = egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "api.example.com"}}}

// noNetworks is a driver that cannot make networks.
type noNetworks struct{ *fake.Driver }

func (noNetworks) Capabilities() driver.Capabilities { return driver.Capabilities{ImageImport: true} }

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	image := func(*config.Profile) (string, bool) { return "", false }
	for name, c := range map[string]netctl.Config{
		"no settings": {Driver: e.drv, Store: e.st, ProfileImage: image, InstanceID: instance},
		"no driver":   {Settings: e.cfg, Store: e.st, ProfileImage: image, InstanceID: instance},
		"no store":    {Settings: e.cfg, Driver: e.drv, ProfileImage: image, InstanceID: instance},
		"no image":    {Settings: e.cfg, Driver: e.drv, Store: e.st, InstanceID: instance},
		"no instance": {Settings: e.cfg, Driver: e.drv, Store: e.st, ProfileImage: image},
	} {
		if _, err := netctl.New(c); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
}

// A host that cannot enforce networked modes says so and why, refuses
// them with 409 network_mode_unavailable (never opens them), and still
// gives mode none.
func TestNetworkedModesFailClosed(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		tune   func(*netctl.Config)
		reason string
	}{
		"driver without networks": {func(c *netctl.Config) { c.Driver = noNetworks{c.Driver.(*fake.Driver)} }, "driver cannot make networks"},
		"no egress binary":        {func(c *netctl.Config) { c.EgressDir = "" }, "genesis-egress binary is not installed"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.tune)
			ctx := t.Context()
			caps := e.net.Capabilities()
			if caps.Gateway != "unavailable" || !strings.Contains(caps.Reason, tc.reason) || !caps.Modes[egress.ModeNone] {
				t.Errorf("capabilities = %+v; want gateway unavailable because %q, mode none", caps, tc.reason)
			}
			for _, m := range []egress.Mode{egress.ModeAllowlist, egress.ModeInternalAPI, egress.ModeToolProxy} {
				if caps.Modes[m] {
					t.Errorf("mode %s offered without a gateway", m)
				}
			}
			if e.net.Start(ctx) {
				t.Error("Start asks for health loops without a gateway")
			}
			p, _ := e.cfg.Profile(e.cfg.Profiles[0].Name)
			_, err := e.net.PolicyFor(ctx, "a", p, &allow)
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != netctl.CodeModeUnavailable {
				t.Errorf("allowlist: %v (code %q); want 409 %s", err, errdefs.Code(err), netctl.CodeModeUnavailable)
			}
			if pol, err := e.net.PolicyFor(ctx, "a", p, &egress.Policy{}); err != nil || pol.Mode != egress.ModeNone {
				t.Errorf("none: %+v, %v", pol, err)
			}
			if _, err := e.net.PolicyFor(ctx, "a", p, &egress.Policy{Mode: "open"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("mode open: %v; want ErrInvalidArgument", err)
			}
			if st, err := e.drv.ListNetworks(ctx); err != nil || len(st) != 0 {
				t.Errorf("networks after refused modes: %v, %v; want none", st, err)
			}
		})
	}
}

// RemoveOrphans removes this instance's sandbox networks whose sandbox is
// not live and marks their records removed; live sandboxes' networks and
// other instances' stay.
func TestRemoveOrphans(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	e.sandbox(t, "sbx_live", allow, sandbox.NetworkActive)
	e.sandbox(t, "sbx_gone", allow, sandbox.NetworkActive)
	live := e.network(t, instance, "sbx_live", "10.231.0.0/28")
	gone := e.network(t, instance, "sbx_gone", "10.231.0.16/28")
	other := e.network(t, "gs-other", "sbx_theirs", "10.231.0.32/28")
	var asked []string
	n := e.net.RemoveOrphans(ctx, func(_ context.Context, id string) bool {
		asked = append(asked, id)
		return id == "sbx_live"
	})
	if n != 1 || e.hasNetwork(t, gone) || !e.hasNetwork(t, live) || !e.hasNetwork(t, other) {
		t.Errorf("RemoveOrphans = %d; networks live %v, gone %v, other instance's %v; want 1, only gone removed",
			n, e.hasNetwork(t, live), e.hasNetwork(t, gone), e.hasNetwork(t, other))
	}
	if strings.Contains(strings.Join(asked, ","), "sbx_theirs") {
		t.Errorf("asked about another instance's sandbox: %v", asked)
	}
	if rec, err := e.st.GetSandboxNetwork(ctx, "", "sbx_gone"); err != nil || rec.Status != sandbox.NetworkRemoved {
		t.Errorf("record of the orphan = %+v, %v; want removed", rec, err)
	}
	if rec, err := e.st.GetSandboxNetwork(ctx, "", "sbx_live"); err != nil || rec.Status != sandbox.NetworkActive {
		t.Errorf("record of the live sandbox = %+v, %v; want active", rec, err)
	}
}

// Release removes a networked sandbox's network and marks its record
// removed, once; a sandbox without a network is left alone.
func TestRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	e.sandbox(t, "sbx_net", allow, sandbox.NetworkActive)
	e.sandbox(t, "sbx_none", egress.Policy{Mode: egress.ModeNone}, "")
	name := e.network(t, instance, "sbx_net", "10.231.0.0/28")
	e.net.Release(ctx, "sbx_net")
	if e.hasNetwork(t, name) {
		t.Error("network left after Release")
	}
	rec, err := e.st.GetSandboxNetwork(ctx, "", "sbx_net")
	if err != nil || rec.Status != sandbox.NetworkRemoved {
		t.Fatalf("record after Release = %+v, %v; want removed", rec, err)
	}
	e.net.Release(ctx, "sbx_net") // idempotent
	if again, err := e.st.GetSandboxNetwork(ctx, "", "sbx_net"); err != nil || again.ResourceVersion != rec.ResourceVersion {
		t.Errorf("a second Release changed the record: %+v, %v", again, err)
	}
	e.net.Release(ctx, "sbx_none")
	if _, err := e.st.GetSandboxNetwork(ctx, "", "sbx_none"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a none sandbox got a network record: %v", err)
	}
}

// Prepare leaves a none sandbox's spec alone and refuses a networked one
// when sandboxes do not run on this host (no SandboxDir).
func TestPrepare(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // no SandboxDir
	ctx := t.Context()
	none := e.sandbox(t, "sbx_none", egress.Policy{Mode: egress.ModeNone}, "")
	spec := driver.Spec{Network: "none"}
	if err := e.net.Prepare(ctx, none, &spec); err != nil || spec.Network != "none" || len(spec.Env) != 0 || len(spec.Mounts) != 0 {
		t.Errorf("Prepare of a none sandbox: %v, spec %+v; want unchanged", err, spec)
	}
	networked := e.sandbox(t, "sbx_net", allow, sandbox.NetworkPending)
	if err := e.net.Prepare(ctx, networked, &spec); !errors.Is(err, errdefs.ErrNotImplemented) {
		t.Errorf("Prepare without host directories: %v; want ErrNotImplemented", err)
	}
	if st, _ := e.drv.ListNetworks(ctx); len(st) != 0 {
		t.Errorf("networks made by a refused Prepare: %+v", st)
	}
}

// Get shows a none sandbox as mode none, status none; Update refuses to
// add a network to it; Events checks its paging arguments.
func TestGetUpdateEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	sb := e.sandbox(t, "sbx_none", egress.Policy{Mode: egress.ModeNone}, "")
	n, err := e.net.Get(ctx, sb)
	if err != nil || n.Policy.Mode != egress.ModeNone || n.Status != sandbox.NetworkNone || n.ResourceVersion != 1 {
		t.Fatalf("Get = %+v, %v; want mode none, status none, version 1", n, err)
	}
	if _, err := e.net.Update(ctx, sb, 0, allow); !errors.Is(err, errdefs.ErrConflict) || errdefs.Code(err) != netctl.CodeRequiresRecreate {
		t.Errorf("none → allowlist: %v; want 409 %s", err, netctl.CodeRequiresRecreate)
	}
	if _, err := e.net.Update(ctx, sb, 2, egress.Policy{Mode: egress.ModeNone}); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("stale version: %v; want 412", err)
	}
	stopped := *sb
	stopped.State = sandbox.StateDestroyed
	if _, err := e.net.Update(ctx, &stopped, 0, egress.Policy{Mode: egress.ModeNone}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("update of a destroyed sandbox: %v; want 409", err)
	}
	net := e.sandbox(t, "sbx_net", allow, sandbox.NetworkActive)
	if _, err := e.net.Update(ctx, net, 0, allow); !errors.Is(err, errdefs.ErrUnavailable) || errdefs.Code(err) != netctl.CodeEnforcementDown {
		t.Errorf("policy change with no gateway running: %v; want 503 %s", err, netctl.CodeEnforcementDown)
	}
	if rec, _ := e.st.GetSandboxNetwork(ctx, "", "sbx_net"); rec.ResourceVersion != 2 {
		t.Errorf("a refused policy change wrote the record (version %d)", rec.ResourceVersion)
	}
	for _, bad := range [][2]int{{-1, 0}, {0, -1}, {0, netctl.MaxEventsLimit + 1}} {
		if _, err := e.net.Events(ctx, sb.ID, int64(bad[0]), bad[1]); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Events(cursor %d, limit %d): %v; want ErrInvalidArgument", bad[0], bad[1], err)
		}
	}
	if page, err := e.net.Events(ctx, sb.ID, 7, 0); err != nil || len(page.Events) != 0 || page.Next != 7 {
		t.Errorf("Events of a quiet sandbox = %+v, %v; want none, next 7", page, err)
	}
}
