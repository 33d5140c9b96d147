package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Defaults of Config.
const (
	DefaultHost          = "unix:///var/run/docker.sock"
	DefaultCallTimeout   = 30 * time.Second
	DefaultImportTimeout = 10 * time.Minute
	DefaultProbeTimeout  = 20 * time.Second
)

// Config configures a Driver. Zero fields take the defaults above.
type Config struct {
	// Host is the daemon's Unix socket, as "unix:///path" or "/path".
	Host string
	// CallTimeout bounds every API call that is not an import or a stop grace.
	CallTimeout time.Duration
	// ImportTimeout bounds ImportImage.
	ImportTimeout time.Duration
	// AgentDir is the host directory holding the static genesis-agent binary;
	// the probe mounts it to run the agent's "version" command in a smoke
	// container. Empty means runtimes cannot be smoke-tested.
	AgentDir string
	// ProbeTimeout bounds one runtime's smoke run.
	ProbeTimeout time.Duration
	// Self is the container the service runs in (FindSelf), nil when it
	// runs on the daemon's host: bind-mount sources are then translated
	// to where the daemon finds them.
	Self *SelfContainer
	// RuntimeRoot is where the daemon's runc shim keeps its runtimes'
	// state (runsc --root; default DefaultRuntimeRoot).
	RuntimeRoot string
	// RestoreOrderDir is where restore orders are left for the
	// runsc-restore runtime (default driver.RestoreOrderDir; the runtime's
	// --genesis-restore-dir must name the same directory).
	RestoreOrderDir string
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
}

// Driver is the Docker implementation of driver.Driver and
// driver.ImageImporter. It is safe for concurrent use.
type Driver struct {
	cfg    Config
	log    *slog.Logger
	api    *apiClient
	probeM sync.Mutex // serialises creation of the probe image
}

var (
	_ driver.Driver        = (*Driver)(nil)
	_ driver.ImageImporter = (*Driver)(nil)
)

// New validates cfg and returns a Driver. It does not contact the daemon.
func New(cfg Config) (*Driver, error) {
	if cfg.Host == "" {
		cfg.Host = DefaultHost
	}
	socket, ok := strings.CutPrefix(cfg.Host, "unix://")
	if !ok {
		socket = cfg.Host
	}
	if !path.IsAbs(socket) {
		return nil, errdefs.Invalid("docker: host %q: want unix:///absolute/path", cfg.Host)
	}
	if cfg.CallTimeout < 0 || cfg.ImportTimeout < 0 || cfg.ProbeTimeout < 0 {
		return nil, fmt.Errorf("docker: negative timeout: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ImportTimeout == 0 {
		cfg.ImportTimeout = DefaultImportTimeout
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.AgentDir != "" && !path.IsAbs(cfg.AgentDir) {
		return nil, errdefs.Invalid("docker: agent dir %q must be absolute", cfg.AgentDir)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, log: log.With("driver", "docker"), api: newAPIClient(socket)}, nil
}

// Name returns "docker".
func (d *Driver) Name() string { return "docker" }

// Capabilities reports image import; pause and checkpoint are not offered.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{ImageImport: true, Networks: true}
}

// callCtx bounds ctx by the call timeout (an earlier deadline of ctx wins).
func (d *Driver) callCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.cfg.CallTimeout+extra)
}

// cleanupCtx is a context for rollback and cleanup that survives the
// caller's cancellation but still has a deadline.
func (d *Driver) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CallTimeout)
}

// Close closes the driver's idle connections to the daemon. Calls still
// running are not affected, and the driver stays usable (a later call dials
// again); a process that drops a Driver calls it so that no connection
// goroutines outlive it.
func (d *Driver) Close() { d.api.http.CloseIdleConnections() }

// Ping checks that the daemon answers.
func (d *Driver) Ping(ctx context.Context) error {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	return d.api.call(ctx, request{op: "ping", method: http.MethodGet, path: "/_ping", versionless: true}, nil)
}

// validID accepts container ids and names: no path or query metacharacters.
func validID(id string) error {
	if id == "" || len(id) > 256 || strings.HasPrefix(id, ".") {
		return errdefs.Invalid("docker: bad container id %q", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return errdefs.Invalid("docker: bad container id %q", id)
		}
	}
	return nil
}

// validRef accepts image references (name[:tag][@digest], or an image id).
func validRef(ref string) error {
	if ref == "" || len(ref) > 512 || strings.Contains(ref, "..") || strings.HasPrefix(ref, "/") {
		return errdefs.Invalid("docker: bad image reference %q", ref)
	}
	for _, c := range ref {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.-/:@", c)) {
			return errdefs.Invalid("docker: bad image reference %q", ref)
		}
	}
	return nil
}

// imageNotBuilt is the error for an image that is not present locally.
func imageNotBuilt(ref string) error {
	return errdefs.WithCode("image_not_built", fmt.Errorf(
		"docker: image %s is not present locally; build it with \"make images\": %w", ref, errdefs.ErrFailedPrecondition))
}

// runtimeUnavailable is the error for a runtime Docker does not offer.
func runtimeUnavailable(rt string) error {
	return errdefs.WithCode("runtime_unavailable", fmt.Errorf(
		"docker: runtime %q is not registered with the Docker daemon: %w", rt, errdefs.ErrFailedPrecondition))
}

// buildCreate turns spec into the create request, applying the hardening
// every container gets.
func buildCreate(spec driver.Spec) (createRequest, error) {
	if spec.Image == "" {
		return createRequest{}, errdefs.Invalid("docker: create: image is required")
	}
	if err := validRef(spec.Image); err != nil {
		return createRequest{}, err
	}
	r := spec.Resources
	if r.CPU < 0 || r.MemoryMB < 0 || r.Pids < 0 || math.IsNaN(r.CPU) || math.IsInf(r.CPU, 0) {
		return createRequest{}, errdefs.Invalid("docker: create: negative or invalid resources %+v", r)
	}
	binds := make([]string, 0, len(spec.Mounts))
	for _, m := range spec.Mounts {
		if !path.IsAbs(m.Source) || !path.IsAbs(m.Target) || strings.ContainsAny(m.Source+m.Target, ":,\n") {
			return createRequest{}, errdefs.Invalid("docker: create: bad mount %q → %q: paths must be absolute without ':' or ','", m.Source, m.Target)
		}
		b := m.Source + ":" + m.Target
		if m.ReadOnly {
			b += ":ro"
		}
		binds = append(binds, b)
	}
	for target := range spec.Tmpfs {
		if !path.IsAbs(target) || strings.ContainsAny(target, ":,\n") {
			return createRequest{}, errdefs.Invalid("docker: create: bad tmpfs target %q", target)
		}
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[driver.LabelManaged] = "true"
	network := spec.Network
	if network == "" {
		network = "none"
	}
	initFalse := false
	secOpt := []string{"no-new-privileges:true"}
	if spec.Runtime == sandbox.RuntimeRunc && spec.Restore == nil {
		// runsc applies its own filter and ignores the container's.
		if opt := nativeSeccompOpt(); opt != "" {
			secOpt = append(secOpt, opt)
		}
	}
	hc := hostConfig{
		Binds:          binds,
		NetworkMode:    network,
		CapAdd:         slices.Clone(spec.CapAdd),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    secOpt,
		ReadonlyRootfs: spec.ReadOnly,
		Tmpfs:          maps.Clone(spec.Tmpfs),
		Runtime:        runtimeOf(spec),
		Init:           &initFalse,
		NanoCpus:       int64(math.Round(r.CPU * 1e9)),
		Sysctls:        maps.Clone(spec.Sysctls),
	}
	if r.MemoryMB > 0 {
		hc.Memory = r.MemoryMB << 20
		hc.MemorySwap = hc.Memory
	}
	if r.Pids > 0 {
		limit := HostPidsLimit(spec.Runtime, r.Pids)
		hc.PidsLimit = &limit
	}
	return createRequest{
		Hostname:   spec.Hostname,
		User:       spec.User,
		Env:        slices.Clone(spec.Env),
		Entrypoint: slices.Clone(spec.Cmd),
		WorkingDir: spec.WorkDir,
		Labels:     labels,
		Image:      spec.Image,
		HostConfig: hc,
	}, nil
}

// checkHardening reports fields of the requested host config that the
// daemon did not keep (for example a pids limit the kernel cannot enforce).
func checkHardening(want, got hostConfig) error {
	var bad []string
	if !slices.Contains(got.CapDrop, "ALL") {
		bad = append(bad, "CapDrop ALL")
	}
	if !slices.Contains(got.SecurityOpt, "no-new-privileges:true") && !slices.Contains(got.SecurityOpt, "no-new-privileges") {
		bad = append(bad, "no-new-privileges")
	}
	for _, o := range want.SecurityOpt {
		if strings.HasPrefix(o, "seccomp=") && !slices.Contains(got.SecurityOpt, o) {
			bad = append(bad, "the seccomp profile")
		}
	}
	if got.Privileged {
		bad = append(bad, "privileged")
	}
	if got.NetworkMode != want.NetworkMode {
		bad = append(bad, "NetworkMode "+want.NetworkMode)
	}
	if got.ReadonlyRootfs != want.ReadonlyRootfs {
		bad = append(bad, "ReadonlyRootfs")
	}
	if want.Memory != got.Memory || want.MemorySwap != got.MemorySwap {
		bad = append(bad, "Memory/MemorySwap")
	}
	if want.NanoCpus != got.NanoCpus {
		bad = append(bad, "NanoCpus")
	}
	if want.PidsLimit != nil && (got.PidsLimit == nil || *got.PidsLimit != *want.PidsLimit) {
		bad = append(bad, "PidsLimit")
	}
	if want.Runtime != "" && got.Runtime != want.Runtime {
		bad = append(bad, "Runtime "+want.Runtime)
	}
	if len(bad) > 0 {
		return fmt.Errorf("docker daemon did not apply %s: %w", strings.Join(bad, ", "), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// Create creates (does not start) a hardened container for spec: one
// create call and one inspection (the hardening check). A missing image
// fails with code image_not_built, an unregistered runtime with code
// runtime_unavailable (both errdefs.ErrFailedPrecondition); nothing is left
// behind on failure.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (string, error) {
	if d.cfg.Self != nil && len(spec.Mounts) > 0 {
		mounts := slices.Clone(spec.Mounts)
		for i := range mounts {
			src, err := d.hostSource(mounts[i].Source)
			if err != nil {
				return "", fmt.Errorf("docker: create container %s: mount %s: %w", spec.Name, mounts[i].Target, err)
			}
			mounts[i].Source = src
		}
		spec.Mounts = mounts
	}
	body, err := buildCreate(spec)
	if err != nil {
		return "", err
	}
	if spec.Name != "" {
		if err := validID(spec.Name); err != nil {
			return "", err
		}
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()

	// No image inspection first: the daemon's create never pulls, and
	// answers 404 for a missing image (createFailed tells that apart from
	// other 404s), so the call that succeeds is the only one.
	q := url.Values{}
	if spec.Name != "" {
		q.Set("name", spec.Name)
	}
	started := time.Now()
	var created createResponse
	err = d.api.call(ctx, request{op: "create container", method: http.MethodPost, path: "/containers/create", query: q, body: body}, &created)
	if err != nil {
		return "", d.createFailed(ctx, spec, started, err)
	}
	for _, w := range created.Warnings {
		d.log.WarnContext(ctx, "docker create warning", "container", created.ID, "warning", w)
	}

	raw, err := d.inspectRaw(ctx, created.ID)
	if err == nil {
		err = checkHardening(body.HostConfig, raw.HostConfig)
	}
	if err == nil && spec.Restore != nil {
		err = d.writeRestoreOrder(created.ID, spec.Restore)
	}
	if err != nil {
		d.rollback(ctx, created.ID)
		return "", fmt.Errorf("docker: create container %s: %w", spec.Name, err)
	}
	return created.ID, nil
}

// runtimeOf is the OCI runtime of a container for spec: a restore goes
// through driver.RestoreRuntime (runsc that restores at start).
func runtimeOf(spec driver.Spec) string {
	if spec.Restore != nil {
		return driver.RestoreRuntime
	}
	return string(spec.Runtime)
}

// createFailed classifies a failed create call and, when the outcome is
// unknown (the call did not get an answer), removes a container the daemon
// may have made anyway.
func (d *Driver) createFailed(ctx context.Context, spec driver.Spec, started time.Time, err error) error {
	switch statusOf(err) {
	case http.StatusNotFound:
		// The image, or something else the container names (a network):
		// asked only now, so that a create that succeeds costs no
		// inspection of its image.
		if present, perr := d.imagePresent(ctx, spec.Image); perr == nil && !present {
			return fmt.Errorf("%w (%v)", imageNotBuilt(spec.Image), err)
		}
		return err
	case http.StatusConflict:
		return fmt.Errorf("%w: %w", err, errdefs.ErrAlreadyExists)
	case http.StatusBadRequest:
		if spec.Runtime != "" {
			if rts, rerr := d.RegisteredRuntimes(ctx); rerr == nil {
				if _, ok := rts[string(spec.Runtime)]; !ok {
					return fmt.Errorf("%w (%v)", runtimeUnavailable(string(spec.Runtime)), err)
				}
			}
		}
		return err
	case 0:
		if spec.Name != "" {
			d.rollbackByName(ctx, spec, started)
		}
	}
	return err
}

// rollback force-removes a container made by a failed operation.
func (d *Driver) rollback(ctx context.Context, id string) {
	cctx, cancel := d.cleanupCtx(ctx)
	defer cancel()
	if err := d.Remove(cctx, id); err != nil {
		d.log.ErrorContext(ctx, "rollback: remove container failed; it may leak until orphan cleanup", "container", id, "err", err)
	}
}

// rollbackByName removes the container called spec.Name if it is the one
// this create made: same labels, created after the call began.
func (d *Driver) rollbackByName(ctx context.Context, spec driver.Spec, started time.Time) {
	cctx, cancel := d.cleanupCtx(ctx)
	defer cancel()
	raw, err := d.inspectRaw(cctx, spec.Name)
	if err != nil {
		return
	}
	created, _ := time.Parse(time.RFC3339Nano, raw.Created)
	if created.Before(started.Add(-2 * time.Second)) {
		return
	}
	for k, v := range spec.Labels {
		if raw.Config.Labels[k] != v {
			return
		}
	}
	d.rollback(cctx, raw.ID)
}

// Start starts a created container. Starting a running one succeeds.
func (d *Driver) Start(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	// A restore reads its image in the call: allow for a large one.
	ctx, cancel := d.callCtx(ctx, time.Minute)
	defer cancel()
	defer d.dropRestoreOrder(id) // read (or not needed) once started
	err := d.api.call(ctx, request{op: "start container " + id, method: http.MethodPost, path: "/containers/" + id + "/start"}, nil)
	if statusOf(err) == http.StatusNotModified {
		return nil
	}
	return err
}

// Stop sends the stop signal and kills the container after grace. Stopping
// a stopped container succeeds.
func (d *Driver) Stop(ctx context.Context, id string, grace time.Duration) error {
	if err := validID(id); err != nil {
		return err
	}
	grace = max(grace, 0)
	secs := int(math.Ceil(grace.Seconds()))
	ctx, cancel := d.callCtx(ctx, time.Duration(secs)*time.Second)
	defer cancel()
	q := url.Values{"t": {strconv.Itoa(secs)}}
	err := d.api.call(ctx, request{op: "stop container " + id, method: http.MethodPost, path: "/containers/" + id + "/stop", query: q}, nil)
	if statusOf(err) == http.StatusNotModified {
		return nil
	}
	return err
}

// Remove force-removes a container and its anonymous volumes. A missing
// container is not an error; a removal already in progress is waited for.
func (d *Driver) Remove(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	defer d.dropRestoreOrder(id)
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	q := url.Values{"force": {"1"}, "v": {"1"}}
	backoff := 50 * time.Millisecond
	for {
		err := d.api.call(ctx, request{op: "remove container " + id, method: http.MethodDelete, path: "/containers/" + id, query: q}, nil)
		switch statusOf(err) {
		case http.StatusNotFound:
			return nil
		case http.StatusConflict:
			// Removal already in progress: wait until it is gone.
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return transportError(ctx, "remove container "+id+" (waiting for removal in progress)", ctx.Err())
			case <-t.C:
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		return err
	}
}

func (d *Driver) inspectRaw(ctx context.Context, id string) (containerJSON, error) {
	var c containerJSON
	err := d.api.call(ctx, request{op: "inspect container " + id, method: http.MethodGet, path: "/containers/" + id + "/json"}, &c)
	return c, err
}

// parseTime parses Docker's RFC 3339 times; Docker's zero time yields zero.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// Inspect returns the status of a container; errdefs.ErrNotFound if absent.
func (d *Driver) Inspect(ctx context.Context, id string) (driver.Status, error) {
	if err := validID(id); err != nil {
		return driver.Status{}, err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	c, err := d.inspectRaw(ctx, id)
	if err != nil {
		return driver.Status{}, err
	}
	return driver.Status{
		ID:        c.ID,
		Name:      strings.TrimPrefix(c.Name, "/"),
		Labels:    c.Config.Labels,
		Image:     c.Config.Image,
		Runtime:   c.HostConfig.Runtime,
		State:     c.State.Status,
		Running:   c.State.Running,
		ExitCode:  c.State.ExitCode,
		OOMKilled: c.State.OOMKilled,
		Pid:       c.State.Pid,
		CreatedAt: parseTime(c.Created),
		StartedAt: parseTime(c.State.StartedAt),
		Networks:  networksOf(c),
	}, nil
}

func networksOf(c containerJSON) map[string]string {
	if len(c.NetworkSettings.Networks) == 0 {
		return nil
	}
	out := make(map[string]string, len(c.NetworkSettings.Networks))
	for name, n := range c.NetworkSettings.Networks {
		out[name] = n.IPAddress
	}
	return out
}

// List returns every container labelled dev.genesis.managed=true. Entries
// carry the summary fields only (id, name, labels, image, state, created);
// Runtime comes from the runtime label. Use Inspect for exit details.
func (d *Driver) List(ctx context.Context) ([]driver.Status, error) {
	return d.list(ctx, driver.LabelManaged+"=true")
}

func (d *Driver) list(ctx context.Context, labelFilters ...string) ([]driver.Status, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	f, _ := json.Marshal(map[string][]string{"label": labelFilters})
	q := url.Values{"all": {"1"}, "filters": {string(f)}}
	var cs []containerSummary
	if err := d.api.call(ctx, request{op: "list containers", method: http.MethodGet, path: "/containers/json", query: q}, &cs); err != nil {
		return nil, err
	}
	out := make([]driver.Status, 0, len(cs))
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, driver.Status{
			ID:        c.ID,
			Name:      name,
			Labels:    c.Labels,
			Image:     c.Image,
			Runtime:   c.Labels[driver.LabelRuntime],
			State:     c.State,
			Running:   c.State == "running",
			CreatedAt: time.Unix(c.Created, 0).UTC(),
		})
	}
	return out, nil
}

// ImagePresent reports whether ref exists locally. It never pulls.
func (d *Driver) ImagePresent(ctx context.Context, ref string) (bool, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	return d.imagePresent(ctx, ref)
}

func (d *Driver) imagePresent(ctx context.Context, ref string) (bool, error) {
	if err := validRef(ref); err != nil {
		return false, err
	}
	err := d.api.call(ctx, request{op: "inspect image " + ref, method: http.MethodGet, path: "/images/" + ref + "/json"}, nil)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ImageLabels returns the labels of the local image ref (nil, false when it
// is absent). It never pulls.
func (d *Driver) ImageLabels(ctx context.Context, ref string) (map[string]string, bool, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	if err := validRef(ref); err != nil {
		return nil, false, err
	}
	var img struct {
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"`
	}
	err := d.api.call(ctx, request{op: "inspect image " + ref, method: http.MethodGet, path: "/images/" + ref + "/json"}, &img)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return img.Config.Labels, true, nil
}

// splitRef splits "repo[:tag]" into repo and tag (default "latest").
func splitRef(ref string) (repo, tag string, err error) {
	if err := validRef(ref); err != nil {
		return "", "", err
	}
	if strings.Contains(ref, "@") {
		return "", "", errdefs.Invalid("docker: import: reference %q must not carry a digest", ref)
	}
	repo, tag = ref, "latest"
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		repo, tag = ref[:i], ref[i+1:]
	}
	if repo == "" || tag == "" {
		return "", "", errdefs.Invalid("docker: import: bad reference %q", ref)
	}
	return repo, tag, nil
}

// labelChange renders a Dockerfile LABEL instruction for one label.
func labelChange(k, v string) (string, error) {
	if k == "" || strings.ContainsAny(k, " \t\n\r=\"'\\") || strings.ContainsAny(v, "\n\r") {
		return "", errdefs.Invalid("docker: import: label %q=%q not representable", k, v)
	}
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `"`, `\"`)
	return fmt.Sprintf(`LABEL %s="%s"`, k, v), nil
}

// errReader remembers the error of the caller's reader, so that a failure
// on our side is not reported as a daemon failure.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// ImportImage imports rootfs (a tar stream) as image ref with the given
// labels and Dockerfile changes (e.g. "ENV A=b"). It is bounded by
// ImportTimeout rather than CallTimeout.
func (d *Driver) ImportImage(ctx context.Context, ref string, rootfs io.Reader, labels map[string]string, changes []string) error {
	repo, tag, err := splitRef(ref)
	if err != nil {
		return err
	}
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	for _, c := range changes {
		q.Add("changes", c)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		c, err := labelChange(k, labels[k])
		if err != nil {
			return err
		}
		q.Add("changes", c)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ImportTimeout)
	defer cancel()
	src := &errReader{r: rootfs}
	op := "import image " + ref
	resp, err := d.api.do(ctx, request{op: op, method: http.MethodPost, path: "/images/create", query: q, rawBody: src, contentType: "application/x-tar"})
	if src.err != nil {
		if err == nil {
			resp.Body.Close()
		}
		return fmt.Errorf("docker: %s: reading root filesystem: %w", op, src.err)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m progressMessage
		err := dec.Decode(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return transportError(ctx, op, err)
			}
			return fmt.Errorf("docker: %s: read progress: %v: %w", op, err, errdefs.ErrUnavailable)
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			return fmt.Errorf("docker: %s: %s: %w", op, msg, errdefs.ErrInvalidArgument)
		}
	}
	d.log.InfoContext(ctx, "imported image", "ref", ref)
	return nil
}

// RegisteredRuntimes returns the OCI runtimes registered with the daemon,
// name → path. It does not check that they work; Probe does.
func (d *Driver) RegisteredRuntimes(ctx context.Context) (map[string]string, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	info, err := d.info(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(info.Runtimes))
	for name, r := range info.Runtimes {
		out[name] = r.Path
	}
	return out, nil
}

func (d *Driver) info(ctx context.Context) (infoResponse, error) {
	var info infoResponse
	err := d.api.call(ctx, request{op: "info", method: http.MethodGet, path: "/info"}, &info)
	return info, err
}

// Wait blocks until the container is not running and returns its exit code.
// Waiting is bounded by ctx's deadline, or by CallTimeout when ctx has none.
func (d *Driver) Wait(ctx context.Context, id string) (int, error) {
	if err := validID(id); err != nil {
		return 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = d.callCtx(ctx, 0)
		defer cancel()
	}
	var w waitResponse
	err := d.api.call(ctx, request{op: "wait container " + id, method: http.MethodPost, path: "/containers/" + id + "/wait", query: url.Values{"condition": {"not-running"}}}, &w)
	if err != nil {
		return 0, err
	}
	if w.Error != nil && w.Error.Message != "" {
		return w.StatusCode, fmt.Errorf("docker: wait container %s: %s: %w", id, w.Error.Message, errdefs.ErrInternal)
	}
	return w.StatusCode, nil
}

// MaxLogBytes bounds how much of each stream Logs returns.
const MaxLogBytes = 4 << 20

// Logs returns what the container wrote to stdout and stderr so far, at
// most MaxLogBytes of each (the rest is dropped).
func (d *Driver) Logs(ctx context.Context, id string) (stdout, stderr []byte, err error) {
	if err := validID(id); err != nil {
		return nil, nil, err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	op := "logs of container " + id
	resp, err := d.api.do(ctx, request{op: op, method: http.MethodGet, path: "/containers/" + id + "/logs", query: url.Values{"stdout": {"1"}, "stderr": {"1"}}})
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var o, e limitedBuffer
	o.max, e.max = MaxLogBytes, MaxLogBytes
	if err := demux(resp.Body, &o, &e); err != nil {
		if ctx.Err() != nil {
			return nil, nil, transportError(ctx, op, err)
		}
		return nil, nil, fmt.Errorf("docker: %s: %w", op, err)
	}
	return o.buf, e.buf, nil
}

// HostPidsLimit is the pids cgroup limit set on the host for a sandbox that
// may run pids processes. Under runc it is pids itself. Under gVisor the
// cgroup also counts the sandbox kernel's own tasks (about 30 at rest, plus
// about two host tasks per sandboxed process with the systrap platform), so
// the host limit is scaled to let roughly pids processes run inside. When a
// gVisor sandbox reaches it, gVisor ends the whole sandbox rather than
// failing the fork; the service then reports the sandbox failed. Either way
// the host's process table is protected.
func HostPidsLimit(rt sandbox.Runtime, pids int64) int64 {
	if rt == sandbox.RuntimeRunsc {
		return 2*pids + 64
	}
	return pids
}
