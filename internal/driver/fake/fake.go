package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Op names one driver operation, for failure injection and hooks.
type Op string

// Operations of the driver.
const (
	OpProbe        Op = "probe"
	OpCreate       Op = "create"
	OpStart        Op = "start"
	OpStop         Op = "stop"
	OpRemove       Op = "remove"
	OpInspect      Op = "inspect"
	OpList         Op = "list"
	OpImagePresent Op = "image_present"
	OpImportImage  Op = "import_image"
)

// Faults are errors returned by the next and every following call of an
// operation, until changed. A nil field means the operation works.
type Faults struct {
	Probe, Create, Start, Stop, Remove, Inspect, List, ImagePresent, ImportImage error
}

func (f Faults) of(op Op) error {
	switch op {
	case OpProbe:
		return f.Probe
	case OpCreate:
		return f.Create
	case OpStart:
		return f.Start
	case OpStop:
		return f.Stop
	case OpRemove:
		return f.Remove
	case OpInspect:
		return f.Inspect
	case OpList:
		return f.List
	case OpImagePresent:
		return f.ImagePresent
	case OpImportImage:
		return f.ImportImage
	}
	return nil
}

// Config configures a fake Driver.
type Config struct {
	// Images are present from the start.
	Images []string
	// Runtimes are the runtimes containers may use; empty means runc and runsc.
	Runtimes []sandbox.Runtime
	// Probe is what Probe returns; zero means a healthy result listing
	// Runtimes, each healthy.
	Probe *driver.ProbeResult
	// Hook, if set, is called first by every operation with the container
	// id (or image ref, or spec name) it concerns; a non-nil error is
	// returned as the operation's result. It may block on ctx.
	Hook func(ctx context.Context, op Op, id string) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

type container struct {
	status driver.Status
	spec   driver.Spec
}

// Driver is an in-memory driver.Driver. It is safe for concurrent use.
type Driver struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	containers map[string]*container // by id
	networks   map[string]*network   // by id
	images     map[string]map[string]string
	runtimes   []sandbox.Runtime
	probe      driver.ProbeResult
	faults     Faults
	calls      map[Op]int
}

var (
	_ driver.Driver        = (*Driver)(nil)
	_ driver.ImageImporter = (*Driver)(nil)
)

// New returns a fake driver configured by cfg.
func New(cfg Config) *Driver {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rts := slices.Clone(cfg.Runtimes)
	if len(rts) == 0 {
		rts = []sandbox.Runtime{sandbox.RuntimeRunc, sandbox.RuntimeRunsc}
	}
	d := &Driver{
		cfg:        cfg,
		log:        log.With("driver", "fake"),
		containers: map[string]*container{},
		networks:   map[string]*network{},
		images:     map[string]map[string]string{},
		runtimes:   rts,
		calls:      map[Op]int{},
	}
	for _, im := range cfg.Images {
		d.images[im] = map[string]string{}
	}
	if cfg.Probe != nil {
		d.probe = *cfg.Probe
	} else {
		d.probe = d.defaultProbe()
	}
	return d
}

func (d *Driver) defaultProbe() driver.ProbeResult {
	now := d.cfg.Now().UTC()
	p := driver.ProbeResult{Driver: "fake", Healthy: true, DaemonVersion: "fake", APIVersion: "fake", CgroupVersion: "2", CheckedAt: now,
		Checkpoint: driver.Feature{Reason: "fake driver"}, DiskQuota: driver.Feature{Reason: "fake driver"}}
	for _, r := range d.runtimes {
		v := "fake"
		if r == sandbox.RuntimeRunsc {
			v = "4.19.0-gvisor"
		}
		p.Runtimes = append(p.Runtimes, driver.RuntimeInfo{Name: string(r), Healthy: true, Version: v, CheckedAt: now})
	}
	return p
}

// SetFaults replaces the injected failures.
func (d *Driver) SetFaults(f Faults) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = f
}

// SetProbeResult replaces what Probe returns.
func (d *Driver) SetProbeResult(p driver.ProbeResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.probe = p
}

// AddImage makes an image present.
func (d *Driver) AddImage(ref string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.images[ref] == nil {
		d.images[ref] = map[string]string{}
	}
}

// RemoveImage makes an image absent.
func (d *Driver) RemoveImage(ref string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.images, ref)
}

// ImageLabels returns the labels an image was imported with, if present.
func (d *Driver) ImageLabels(ref string) (map[string]string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.images[ref]
	return maps.Clone(l), ok
}

// Exit simulates the main process of a running container ending.
func (d *Driver) Exit(id string, code int, oomKilled bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.containers[id]
	if !ok {
		return fmt.Errorf("fake: container %s: %w", id, errdefs.ErrNotFound)
	}
	c.status.State, c.status.Running, c.status.Pid = "exited", false, 0
	c.status.ExitCode, c.status.OOMKilled = code, oomKilled
	return nil
}

// Lag makes a running container read as created, not yet running, as a
// backend whose status lags the container's start reports it (a Pod's
// status before the kubelet writes that its container runs).
func (d *Driver) Lag(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.containers[id]
	if !ok {
		return fmt.Errorf("fake: container %s: %w", id, errdefs.ErrNotFound)
	}
	c.status.State, c.status.Running = "created", false
	return nil
}

// Spec returns the spec a container was created from.
func (d *Driver) Spec(id string) (driver.Spec, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.containers[id]
	if !ok {
		return driver.Spec{}, false
	}
	return c.spec, true
}

// Calls returns how often op was called (failed calls included).
func (d *Driver) Calls(op Op) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[op]
}

// enter runs the common prologue of every operation: context, hook, faults.
func (d *Driver) enter(ctx context.Context, op Op, id string) error {
	d.mu.Lock()
	d.calls[op]++
	fault := d.faults.of(op)
	d.mu.Unlock()
	if err := ctxErr(ctx, op); err != nil {
		return err
	}
	if d.cfg.Hook != nil {
		if err := d.cfg.Hook(ctx, op, id); err != nil {
			return err
		}
	}
	return fault
}

func ctxErr(ctx context.Context, op Op) error {
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case err == context.DeadlineExceeded:
		return fmt.Errorf("fake: %s: %w: %w", op, errdefs.ErrDeadlineExceeded, err)
	default:
		return fmt.Errorf("fake: %s: %w", op, err)
	}
}

// Name returns "fake".
func (d *Driver) Name() string { return "fake" }

// Capabilities reports image import and networks.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{ImageImport: true, Networks: true}
}

// Probe returns the configured probe result, stamped with the current time.
func (d *Driver) Probe(ctx context.Context) (driver.ProbeResult, error) {
	if err := d.enter(ctx, OpProbe, ""); err != nil {
		return driver.ProbeResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.probe
	p.Runtimes = slices.Clone(p.Runtimes)
	return p, nil
}

func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create records a container in state "created".
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (string, error) {
	if err := d.enter(ctx, OpCreate, spec.Name); err != nil {
		return "", err
	}
	if spec.Image == "" {
		return "", errdefs.Invalid("fake: create: image is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	imgLabels, ok := d.images[spec.Image]
	if !ok {
		return "", errdefs.WithCode("image_not_built", fmt.Errorf(
			"fake: image %s is not present locally; build it with \"make images\": %w", spec.Image, errdefs.ErrFailedPrecondition))
	}
	rt := spec.Runtime
	if rt == "" {
		rt = sandbox.RuntimeRunc
	}
	if !slices.Contains(d.runtimes, rt) {
		return "", errdefs.WithCode("runtime_unavailable", fmt.Errorf(
			"fake: runtime %q is not registered: %w", rt, errdefs.ErrFailedPrecondition))
	}
	if spec.Name != "" {
		for _, c := range d.containers {
			if c.status.Name == spec.Name {
				return "", fmt.Errorf("fake: container name %q in use by %s: %w: %w", spec.Name, c.status.ID, errdefs.ErrAlreadyExists, errdefs.ErrConflict)
			}
		}
	}
	id := newID()
	name := spec.Name
	if name == "" {
		name = "fake-" + id[:12]
	}
	labels := maps.Clone(imgLabels)
	maps.Copy(labels, spec.Labels)
	labels[driver.LabelManaged] = "true"
	spec.Labels = maps.Clone(spec.Labels)
	spec.Cmd = slices.Clone(spec.Cmd)
	spec.Env = slices.Clone(spec.Env)
	spec.Mounts = slices.Clone(spec.Mounts)
	d.containers[id] = &container{spec: spec, status: driver.Status{
		ID: id, Name: name, Labels: labels, Image: spec.Image, Runtime: string(rt),
		State: "created", CreatedAt: d.cfg.Now().UTC(),
	}}
	if n, ok := d.lookupNetwork(spec.Network); ok {
		n.status.Members[id] = n.next.String()
		n.next = n.next.Next()
	}
	d.log.DebugContext(ctx, "created", "container", id, "name", name)
	return id, nil
}

// Start moves a container to "running". Starting a running one succeeds.
func (d *Driver) Start(ctx context.Context, id string) error {
	if err := d.enter(ctx, OpStart, id); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.lookup(id)
	if err != nil {
		return err
	}
	if !c.status.Running {
		c.status.State, c.status.Running = "running", true
		c.status.Pid = 1000 + len(d.containers)
		c.status.ExitCode, c.status.OOMKilled = 0, false
		c.status.StartedAt = d.cfg.Now().UTC()
	}
	return nil
}

// Stop moves a running container to "exited" with code 137 (killed).
// Stopping a stopped container succeeds.
func (d *Driver) Stop(ctx context.Context, id string, _ time.Duration) error {
	if err := d.enter(ctx, OpStop, id); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.lookup(id)
	if err != nil {
		return err
	}
	if c.status.Running {
		c.status.State, c.status.Running, c.status.Pid, c.status.ExitCode = "exited", false, 0, 137
	}
	return nil
}

// Remove deletes a container; a missing one is not an error.
func (d *Driver) Remove(ctx context.Context, id string) error {
	if err := d.enter(ctx, OpRemove, id); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, err := d.lookup(id); err == nil {
		delete(d.containers, c.status.ID)
		for _, n := range d.networks {
			delete(n.status.Members, c.status.ID)
		}
	}
	return nil
}

// Inspect returns a container's status; errdefs.ErrNotFound if absent.
func (d *Driver) Inspect(ctx context.Context, id string) (driver.Status, error) {
	if err := d.enter(ctx, OpInspect, id); err != nil {
		return driver.Status{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.lookup(id)
	if err != nil {
		return driver.Status{}, err
	}
	st := clone(c.status)
	st.Networks = d.networksOf(c.status.ID)
	return st, nil
}

// List returns every container, sorted by creation time then id.
func (d *Driver) List(ctx context.Context) ([]driver.Status, error) {
	if err := d.enter(ctx, OpList, ""); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]driver.Status, 0, len(d.containers))
	for _, c := range d.containers {
		out = append(out, clone(c.status))
	}
	slices.SortFunc(out, func(a, b driver.Status) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out, nil
}

// ImagePresent reports whether ref was configured, added or imported.
func (d *Driver) ImagePresent(ctx context.Context, ref string) (bool, error) {
	if err := d.enter(ctx, OpImagePresent, ref); err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.images[ref]
	return ok, nil
}

// ImportImage reads rootfs to its end and records ref with labels.
func (d *Driver) ImportImage(ctx context.Context, ref string, rootfs io.Reader, labels map[string]string, _ []string) error {
	if err := d.enter(ctx, OpImportImage, ref); err != nil {
		return err
	}
	if ref == "" {
		return errdefs.Invalid("fake: import: reference is required")
	}
	if _, err := io.Copy(io.Discard, rootfs); err != nil {
		return fmt.Errorf("fake: import %s: reading root filesystem: %w", ref, err)
	}
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.images[ref] = l
	return nil
}

// lookup finds a container by id or name. d.mu is held.
func (d *Driver) lookup(id string) (*container, error) {
	if c, ok := d.containers[id]; ok {
		return c, nil
	}
	for _, c := range d.containers {
		if c.status.Name == id {
			return c, nil
		}
	}
	return nil, fmt.Errorf("fake: no such container %s: %w", id, errdefs.ErrNotFound)
}

func clone(s driver.Status) driver.Status {
	s.Labels = maps.Clone(s.Labels)
	return s
}
