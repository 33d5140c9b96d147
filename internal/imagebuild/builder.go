package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
)

// Deadlines for the calls into the image importer.
const (
	presenceTimeout = 30 * time.Second
	importTimeout   = 15 * time.Minute
	lockPoll        = 250 * time.Millisecond
)

// Importer is what the builder needs from the container engine: checking for
// a local image and importing a root filesystem tarball as one. The Docker
// driver implements it (driver.Driver's ImagePresent plus driver.ImageImporter).
type Importer interface {
	// ImagePresent reports whether ref exists locally. It never pulls.
	ImagePresent(ctx context.Context, ref string) (bool, error)
	driver.ImageImporter
}

// Config configures a Builder.
type Config struct {
	// Importer checks for and imports images. Required.
	Importer Importer
	// WorkDir holds scratch root filesystems, the shared package cache and
	// lock files. It must be on a file system that allows device nodes and
	// executables. Default: genesis-imagebuild under os.TempDir().
	WorkDir string
	// Mirror is the Debian archive URI for debootstrap, and for apt while
	// it installs the recipe's packages. Default: the URI the machine's apt
	// sources (/etc/apt) use for the recipe's suite. The image names it in
	// its sources.list, except a mirror on this machine (images.LocalMirror),
	// which a sandbox cannot reach: then the image names the apt sources'
	// one, as a build without Mirror does.
	Mirror string
	// MirrorTrusted builds from Mirror without checking signatures: an
	// unsigned repository, such as one made of a package cache.
	// debootstrap runs with --no-check-gpg and apt trusts the mirror
	// ([trusted=yes]) only while it installs the recipe's packages.
	// Allowed only for a mirror on this machine (images.LocalMirror:
	// file:/ or a loopback address).
	MirrorTrusted bool
	// Repository is the repository prefix of the references the builder
	// tags images with, e.g. "genesis-try/" (a build that leaves the
	// service's images alone). Default: images.RefRepositoryPrefix, the
	// references the service runs.
	Repository string
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
}

// Result describes one Build.
type Result struct {
	// Name is the profile name.
	Name string
	// Ref is the image reference, genesis/<name>:<hash> (with the
	// configured Repository instead of genesis/).
	Ref string
	// Hash is the recipe hash (also the dev.genesis.recipe label).
	Hash string
	// Skipped is true when the image was already present and not rebuilt.
	Skipped bool
	// Duration is the wall time of the Build call, waiting included.
	Duration time.Duration
}

// Builder builds profile images. It is safe for concurrent use; builds run
// one at a time.
type Builder struct {
	importer   Importer
	workDir    string
	mirror     string
	trusted    bool // mirror is trusted unsigned
	repository string
	aptDir     string
	log        *slog.Logger
	// turn is a one-slot semaphore: holding its token means building.
	turn chan struct{}

	mu       sync.Mutex
	inflight map[string]*tracker // recipe name → its running Build's progress

	// Host access, fixed by New; tests in this package replace them.
	geteuid  func() int
	findTool func(name string) (string, error)
}

// New validates cfg and returns a Builder. It touches nothing on the host.
func New(cfg Config) (*Builder, error) {
	if cfg.Importer == nil {
		return nil, errdefs.Invalid("imagebuild: Importer is required")
	}
	wd := cfg.WorkDir
	if wd == "" {
		wd = DefaultWorkDir()
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: work dir %q: %w: %w", cfg.WorkDir, errdefs.ErrInvalidArgument, err)
	}
	if strings.ContainsAny(wd, ", \t\n") {
		// debootstrap takes --cache-dir and the target as plain words.
		return nil, errdefs.Invalid("imagebuild: work dir %q must not contain spaces or commas", wd)
	}
	repo := cfg.Repository
	if repo == "" {
		repo = images.RefRepositoryPrefix
	}
	if !images.ValidRepository(repo) {
		return nil, errdefs.Invalid("imagebuild: repository %q must be lower-case letters, digits, '-', '_', '.' and '/', ending in '/'", cfg.Repository)
	}
	if cfg.Mirror != "" && !images.ValidMirror(cfg.Mirror) {
		return nil, errdefs.Invalid("imagebuild: mirror %q must be an http://, https:// or file:/ URI", cfg.Mirror)
	}
	if cfg.MirrorTrusted && !images.LocalMirror(cfg.Mirror) {
		return nil, fmt.Errorf("imagebuild: a trusted (unsigned) mirror must be on this machine, a file:/ URI or a loopback address like http://127.0.0.1:PORT/, not %q: %w",
			cfg.Mirror, errdefs.ErrInvalidArgument)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Builder{
		importer:   cfg.Importer,
		workDir:    wd,
		mirror:     cfg.Mirror,
		trusted:    cfg.MirrorTrusted,
		repository: repo,
		aptDir:     "/etc/apt",
		log:        log.With("component", "imagebuild"),
		turn:       make(chan struct{}, 1),
		inflight:   map[string]*tracker{},
		geteuid:    os.Geteuid,
		findTool:   func(name string) (string, error) { return findTool(exec.LookPath, name) },
	}
	b.turn <- struct{}{}
	return b, nil
}

// DefaultWorkDir is the work directory of a Builder whose Config names
// none: genesis-imagebuild under os.TempDir().
func DefaultWorkDir() string { return filepath.Join(os.TempDir(), "genesis-imagebuild") }

// PackageCacheDirs returns the directories of the package cache that every
// build of suite under workDir shares: debootstrap's (the base system) and
// apt's (the recipes' packages), holding the .deb files downloaded so far.
func PackageCacheDirs(workDir, suite string) (debootstrap, apt string) {
	dir := filepath.Join(workDir, "cache", suite)
	return filepath.Join(dir, "debootstrap"), filepath.Join(dir, "apt")
}

// ref is the reference the builder tags r's image with.
func (b *Builder) ref(r images.Recipe) string { return r.RefIn(b.repository) }

// Ref returns the reference a build of profile name is tagged with; false
// for an unknown profile.
func (b *Builder) Ref(name string) (string, bool) {
	r, ok := images.Lookup(name)
	if !ok {
		return "", false
	}
	return b.ref(r), true
}

// steps lists the steps a build of r runs.
func steps(r images.Recipe) []string {
	if len(r.Packages) == 0 {
		return []string{StepBootstrap, StepSetup, StepImport}
	}
	return []string{StepBootstrap, StepPackages, StepSetup, StepImport}
}

// Progress returns where the build of profile name stands: of a Build
// call of this process while it runs, or else what the build's status
// file says (a build of another process, or the last one that failed).
// While this process waits for another process's build of the same
// image, it is that build's progress. ok is false when nothing is known.
func (b *Builder) Progress(name string) (Progress, bool) {
	r, ok := images.Lookup(name)
	if !ok {
		return Progress{}, false
	}
	b.mu.Lock()
	t := b.inflight[name]
	b.mu.Unlock()
	if t == nil {
		return ReadStatus(b.workDir, b.ref(r))
	}
	p := t.snapshot()
	if p.State == StateWaiting {
		if other, ok := ReadStatus(b.workDir, b.ref(r)); ok && other.State == StateBuilding && other.PID != p.PID {
			other.Detail = "built by process " + strconv.Itoa(other.PID) + ": " + other.Detail
			return other, true
		}
	}
	return p, true
}

// Build makes sure the image of profile name exists, building it unless it is
// already present (or force is set). Errors: errdefs.ErrInvalidArgument for an
// unknown profile; errdefs.ErrFailedPrecondition when the host cannot build
// (not root, debootstrap missing, no mirror); errdefs.ErrUnavailable when the
// engine or a build step fails; errdefs.ErrDeadlineExceeded when ctx ends
// while waiting for another build. Progress reports where it stands while
// it runs.
func (b *Builder) Build(ctx context.Context, name string, force bool) (res Result, err error) {
	start := time.Now()
	r, ok := images.Lookup(name)
	if !ok {
		return Result{Name: name}, errdefs.Invalid("imagebuild: unknown image profile %q", name)
	}
	res = Result{Name: r.Name, Ref: b.ref(r), Hash: r.Hash}
	log := b.log.With("profile", r.Name, "ref", res.Ref)
	t := newTracker(log, r.Name, res.Ref, "", steps(r))
	b.mu.Lock()
	b.inflight[r.Name] = t
	b.mu.Unlock()
	defer func() {
		t.finish(err)
		b.mu.Lock()
		if b.inflight[r.Name] == t {
			delete(b.inflight, r.Name)
		}
		b.mu.Unlock()
	}()

	select {
	case <-b.turn:
	default:
		t.waiting("another image build of this process runs")
		select {
		case <-b.turn:
		case <-ctx.Done():
			return res, fmt.Errorf("imagebuild: %s: waiting for the running build: %w: %w", res.Ref, errdefs.ErrDeadlineExceeded, ctx.Err())
		}
	}
	defer func() { b.turn <- struct{}{} }()

	if !force {
		present, err := b.present(ctx, res.Ref)
		if err != nil {
			return res, err
		}
		if present {
			res.Skipped = true
			res.Duration = time.Since(start)
			log.Debug("image present, build skipped")
			return res, nil
		}
	}

	tools, err := b.checkHost()
	if err != nil {
		return res, err
	}
	for _, d := range []string{"locks", statusDirName} {
		if err := os.MkdirAll(filepath.Join(b.workDir, d), 0o700); err != nil {
			return res, fmt.Errorf("imagebuild: create work dir: %w: %w", errdefs.ErrInternal, err)
		}
	}
	lp := lockPath(b.workDir, res.Ref)
	if held, _ := lockHeld(lp); held {
		t.waiting("another process builds this image")
	}
	lock, err := lockFile(ctx, lp, lockPoll)
	if err != nil {
		return res, fmt.Errorf("imagebuild: %s: %w", res.Ref, err)
	}
	defer lock.unlock()
	// From here on this build owns the status file (until the deferred
	// finish, which runs before the unlock).
	t.attach(statusPath(b.workDir, res.Ref))
	if !force {
		// Another process may have built it while we waited for the lock.
		present, err := b.present(ctx, res.Ref)
		if err != nil {
			return res, err
		}
		if present {
			res.Skipped = true
			res.Duration = time.Since(start)
			log.Info("image built by another process meanwhile, build skipped")
			return res, nil
		}
	}

	mirror := b.mirror
	if mirror == "" {
		if mirror, err = aptSourcesMirror(b.aptDir, r.Suite); err != nil {
			return res, fmt.Errorf("imagebuild: %w", err)
		}
	}
	log.Info("building image", "suite", r.Suite, "variant", r.Variant, "packages", r.Packages, "mirror", mirror,
		"mirror_trusted", b.trusted, "steps", strings.Join(steps(r), ", "))
	if err := b.build(ctx, log, t, r, res.Ref, tools, mirror); err != nil {
		return res, err
	}
	res.Duration = time.Since(start)
	log.Info("image built", "duration", res.Duration.Round(time.Millisecond))
	return res, nil
}

// hostTools are the absolute paths of the commands a build runs.
type hostTools struct{ debootstrap, chroot, tar, mount, sh string }

// checkHost verifies the process can build images.
func (b *Builder) checkHost() (hostTools, error) {
	if euid := b.geteuid(); euid != 0 {
		return hostTools{}, fmt.Errorf("imagebuild: building images needs root (debootstrap and chroot), running as uid %d; run the build as root: %w",
			euid, errdefs.ErrFailedPrecondition)
	}
	var t hostTools
	for _, tool := range []struct {
		name string
		dst  *string
	}{
		{"debootstrap", &t.debootstrap}, {"chroot", &t.chroot}, {"tar", &t.tar},
		{"mount", &t.mount}, {"sh", &t.sh},
	} {
		p, err := b.findTool(tool.name)
		if err != nil {
			return hostTools{}, fmt.Errorf("imagebuild: %v; install the host tools with scripts/host-setup.sh: %w",
				err, errdefs.ErrFailedPrecondition)
		}
		*tool.dst = p
	}
	return t, nil
}

// present asks the importer whether ref exists, with a deadline.
func (b *Builder) present(ctx context.Context, ref string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, presenceTimeout)
	defer cancel()
	ok, err := b.importer.ImagePresent(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("imagebuild: check image %s: %w", ref, classify(err))
	}
	return ok, nil
}

// classify keeps an error's class, or marks an unclassified engine error
// as errdefs.ErrUnavailable.
func classify(err error) error {
	if errdefs.HTTPStatus(err) != http.StatusInternalServerError || errors.Is(err, errdefs.ErrInternal) {
		return err
	}
	return fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
}

// stepClass is the error class of a failed build step: the deadline when ctx
// ended (the step was killed), otherwise unavailable.
func stepClass(ctx context.Context) error {
	if ctx.Err() != nil {
		return errdefs.ErrDeadlineExceeded
	}
	return errdefs.ErrUnavailable
}

// build runs every step in a fresh scratch directory and always removes it.
func (b *Builder) build(ctx context.Context, log *slog.Logger, t *tracker, r images.Recipe, ref string, tools hostTools, mirror string) (err error) {
	buildRoot := filepath.Join(b.workDir, "build")
	cacheDir := filepath.Join(b.workDir, "cache", r.Suite)
	debootstrapCache, aptCache := PackageCacheDirs(b.workDir, r.Suite)
	for _, d := range []string{buildRoot, debootstrapCache, aptCache} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("imagebuild: create %s: %w: %w", d, errdefs.ErrInternal, err)
		}
	}
	prefix := r.Name + "_" + r.Hash + "-"
	b.removeStale(log, buildRoot, prefix)
	scratch, err := os.MkdirTemp(buildRoot, prefix)
	if err != nil {
		return fmt.Errorf("imagebuild: create scratch dir: %w: %w", errdefs.ErrInternal, err)
	}
	defer func() {
		if rerr := removeScratch(scratch); rerr != nil {
			log.Error("scratch directory left behind", "dir", scratch, "err", rerr)
			if err == nil {
				err = fmt.Errorf("imagebuild: image %s built but cleanup failed: %w: %w", ref, errdefs.ErrInternal, rerr)
			}
		}
	}()
	rootfs := filepath.Join(scratch, "rootfs")

	if err := b.bootstrap(ctx, log, t, r, tools, rootfs, cacheDir, mirror); err != nil {
		return err
	}
	if images.LocalMirror(mirror) {
		// A mirror on this machine is out of a sandbox's reach: the image
		// names the one of the host's apt sources, as a build from it would.
		if public, err := aptSourcesMirror(b.aptDir, r.Suite); err == nil {
			line := fmt.Sprintf("deb %s %s main\n", public, r.Suite)
			if err := os.WriteFile(filepath.Join(rootfs, "etc", "apt", "sources.list"), []byte(line), 0o644); err != nil {
				return fmt.Errorf("imagebuild: %s: %w: %w", ref, errdefs.ErrInternal, err)
			}
		}
	}
	t.step(StepSetup, "scripts", int64(len(r.Setup)))

	for _, f := range r.Files {
		dest := filepath.Join(rootfs, filepath.FromSlash(f.Dest))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return fmt.Errorf("imagebuild: %s: placing %s: %w: %w", ref, f.Dest, errdefs.ErrInternal, err)
		}
		if err := os.WriteFile(dest, []byte(f.Content), 0o644); err != nil {
			return fmt.Errorf("imagebuild: %s: placing %s: %w: %w", ref, f.Dest, errdefs.ErrInternal, err)
		}
	}
	// Setup scripts may fetch (npm ci from a lockfile, say): each starts
	// with the host's resolver configuration, and none of it stays.
	// They also trust what the host trusts (a TLS-inspecting proxy's CA,
	// say) through NODE_EXTRA_CA_CERTS and SSL_CERT_FILE, removed after.
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	resolv := filepath.Join(rootfs, "etc", "resolv.conf")
	hostCA, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	const caInRoot = "/.genesis-build-ca.pem"
	caFile := filepath.Join(rootfs, caInRoot)
	defer os.Remove(caFile)
	step := time.Now()
	for i, s := range r.Setup {
		_ = os.Remove(resolv) // a symlink would write through to elsewhere
		if err := os.WriteFile(resolv, hostResolv, 0o644); err != nil {
			return fmt.Errorf("imagebuild: %s: %w: %w", ref, errdefs.ErrInternal, err)
		}
		var caEnv []string
		if len(hostCA) > 0 {
			if err := os.WriteFile(caFile, hostCA, 0o644); err != nil {
				return fmt.Errorf("imagebuild: %s: %w: %w", ref, errdefs.ErrInternal, err)
			}
			caEnv = []string{"NODE_EXTRA_CA_CERTS=" + caInRoot, "SSL_CERT_FILE=" + caInRoot}
		}
		c := command{
			path: tools.chroot,
			args: []string{rootfs, "/bin/sh", "-euc", s.Content, s.Path},
			env: append([]string{
				"PATH=" + chrootPath, "HOME=/root", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
				"DEBIAN_FRONTEND=noninteractive",
			}, caEnv...),
			privateMounts: true,
			onLine:        detailLines(t, func() int64 { return int64(i) }),
		}
		t.update(int64(i), 0, s.Path, 0)
		if err := c.run(ctx, log); err != nil {
			return fmt.Errorf("imagebuild: %s: setup script %s: %w: %w", ref, s.Path, stepClass(ctx), err)
		}
		t.update(int64(i+1), 0, "", 0)
	}
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		return fmt.Errorf("imagebuild: %s: %w: %w", ref, errdefs.ErrInternal, err)
	}
	if err := os.Remove(caFile); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("imagebuild: %s: %w: %w", ref, errdefs.ErrInternal, err)
	}
	if left, _ := mountsUnder(scratch); len(left) > 0 {
		return fmt.Errorf("imagebuild: %s: mounts left in the root filesystem: %v: %w", ref, left, errdefs.ErrInternal)
	}
	log.Info("image setup done", "duration", time.Since(step).Round(time.Millisecond))

	step = time.Now()
	t.step(StepImport, "bytes", treeSize(rootfs))
	if err := b.importRootfs(ctx, log, t, r, ref, tools, rootfs); err != nil {
		return err
	}
	present, err := b.present(ctx, ref)
	if err != nil {
		return err
	}
	if !present {
		return fmt.Errorf("imagebuild: %s: import reported success but the image is absent: %w", ref, errdefs.ErrUnavailable)
	}
	log.Info("image imported", "duration", time.Since(step).Round(time.Millisecond))
	return nil
}

// removeStale deletes scratch directories of this image left by a crashed
// build. The caller holds the image's lock, so no live build owns them.
func (b *Builder) removeStale(log *slog.Logger, buildRoot, prefix string) {
	stale, _ := filepath.Glob(filepath.Join(buildRoot, prefix+"*"))
	for _, d := range stale {
		if err := removeScratch(d); err != nil {
			log.Warn("stale scratch directory not removed", "dir", d, "err", err)
		} else {
			log.Info("removed stale scratch directory", "dir", d)
		}
	}
}

// bootstrap creates the root filesystem and installs the recipe's packages.
// The package caches are shared by all images of a suite, so a lock keeps two
// processes from filling them at once.
func (b *Builder) bootstrap(ctx context.Context, log *slog.Logger, t *tracker, r images.Recipe, tools hostTools, rootfs, cacheDir, mirror string) (err error) {
	if held, _ := lockHeld(cacheDir + ".lock"); held {
		t.waiting("another build fills the " + r.Suite + " package cache")
	}
	cacheLock, err := lockFile(ctx, cacheDir+".lock", lockPoll)
	if err != nil {
		return fmt.Errorf("imagebuild: %s: package cache: %w", r.Ref(), err)
	}
	defer cacheLock.unlock()

	step := time.Now()
	debootstrapCache, aptCache := PackageCacheDirs(b.workDir, r.Suite)
	args := []string{"--variant=" + r.Variant, "--components=main", "--cache-dir=" + debootstrapCache}
	if b.trusted {
		args = append(args, "--no-check-gpg")
	}
	env := append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	if u, err := url.Parse(mirror); err == nil && images.LocalMirror(mirror) && u.Host != "" {
		// A proxy of the environment must not stand between debootstrap
		// and a mirror on this machine.
		env = append(env, "no_proxy="+u.Hostname(), "NO_PROXY="+u.Hostname())
	}
	c := command{
		path:          tools.debootstrap,
		args:          append(args, r.Suite, rootfs, mirror),
		env:           env,
		privateMounts: true,
		onLine:        lineCounter(t, &debootstrapCounter{}),
	}
	t.step(StepBootstrap, "packages", 0)
	if err := c.run(ctx, log); err != nil {
		detail := ""
		if data, rerr := os.ReadFile(filepath.Join(rootfs, "debootstrap", "debootstrap.log")); rerr == nil {
			detail = "\ndebootstrap.log (end):\n" + lastLines(string(data), 20)
		}
		return fmt.Errorf("imagebuild: %s: %w: %w%s", r.Ref(), stepClass(ctx), err, detail)
	}
	log.Info("root filesystem bootstrapped", "duration", time.Since(step).Round(time.Millisecond))
	if len(r.Packages) == 0 {
		return nil
	}

	step = time.Now()
	if b.trusted {
		// apt in the image trusts the unsigned mirror while it installs,
		// and only then: debootstrap's plain source line comes back.
		sources := filepath.Join(rootfs, "etc", "apt", "sources.list")
		plain, rerr := os.ReadFile(sources)
		if rerr != nil {
			return fmt.Errorf("imagebuild: %s: %w: %w", r.Ref(), errdefs.ErrInternal, rerr)
		}
		line := fmt.Sprintf("deb [trusted=yes] %s %s main\n", mirror, r.Suite)
		if werr := os.WriteFile(sources, []byte(line), 0o644); werr != nil {
			return fmt.Errorf("imagebuild: %s: %w: %w", r.Ref(), errdefs.ErrInternal, werr)
		}
		defer func() {
			if werr := os.WriteFile(sources, plain, 0o644); werr != nil && err == nil {
				err = fmt.Errorf("imagebuild: %s: %w: %w", r.Ref(), errdefs.ErrInternal, werr)
			}
		}()
	}
	c = command{
		path: tools.sh,
		args: append([]string{"-euc", installScript, "install-packages",
			rootfs, aptCache, tools.mount, tools.chroot}, r.Packages...),
		env: []string{"PATH=" + chrootPath, "HOME=/root", "LC_ALL=C.UTF-8",
			"DEBIAN_FRONTEND=noninteractive"},
		privateMounts: true,
		onLine:        lineCounter(t, &aptCounter{}),
	}
	t.step(StepPackages, "packages", 0)
	if err := c.run(ctx, log); err != nil {
		return fmt.Errorf("imagebuild: %s: install packages: %w: %w", r.Ref(), stepClass(ctx), err)
	}
	log.Info("packages installed", "packages", r.Packages, "duration", time.Since(step).Round(time.Millisecond))
	return nil
}

// installScript installs packages with apt inside the root filesystem. It
// runs in a private mount namespace, so /proc and the bind-mounted package
// cache vanish when it exits, however it exits. apt (not debootstrap's
// resolver, which always takes the first alternative of a dependency)
// resolves the packages, without recommends. dpkg's unsafe-io only skips
// fsyncs, which a throwaway build tree does not need.
// Arguments: rootfs, cache dir, mount path, chroot path, packages...
const installScript = `root=$1 cache=$2 mount=$3 chroot=$4
shift 4
"$mount" -t proc proc "$root/proc"
mkdir -p "$root/var/cache/apt/archives"
"$mount" --bind "$cache" "$root/var/cache/apt/archives"
"$chroot" "$root" apt-get -q update
"$chroot" "$root" apt-get -q -y --no-install-recommends \
	-o Dpkg::Options::=--force-unsafe-io -o Dpkg::Use-Pty=0 install -- "$@"
`

// importRootfs streams the root filesystem as a tarball into the importer.
// The stream ends with EOF only if tar succeeded; a failing tar makes the
// importer's read fail, so a truncated tree is never imported.
func (b *Builder) importRootfs(ctx context.Context, log *slog.Logger, t *tracker, r images.Recipe, ref string, tools hostTools, rootfs string) error {
	ctx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	c := command{
		path:   tools.tar,
		args:   []string{"-C", rootfs, "--numeric-owner", "--one-file-system", "-c", "."},
		env:    []string{"PATH=" + chrootPath, "LC_ALL=C"},
		stdout: pw,
	}
	tarDone := make(chan error, 1)
	go func() {
		err := c.run(ctx, log)
		pw.CloseWithError(err) // nil: EOF for the reader
		tarDone <- err
	}()
	labels := map[string]string{
		driver.LabelManaged: "true",
		driver.LabelRecipe:  r.Hash,
		driver.LabelProfile: r.Name,
	}
	versions, err := readVersions(rootfs)
	if err != nil {
		return fmt.Errorf("imagebuild: %s: %w", ref, err)
	}
	for name, v := range versions {
		labels[driver.LabelVersionPrefix+name] = v
	}
	log.Info("importing image", "changes", r.Changes())
	ierr := b.importer.ImportImage(ctx, ref, &countingReader{r: pr, t: t}, labels, r.Changes())
	// If the importer stopped reading early, unblock tar so it exits.
	pr.CloseWithError(errors.New("importer stopped reading"))
	terr := <-tarDone
	switch {
	case terr != nil && ierr == nil:
		return fmt.Errorf("imagebuild: %s: archive root filesystem: %w: %w", ref, errdefs.ErrInternal, terr)
	case ierr != nil:
		if terr != nil {
			ierr = fmt.Errorf("%w (tar: %v)", ierr, terr)
		}
		if ctx.Err() != nil && !errors.Is(ierr, errdefs.ErrDeadlineExceeded) {
			ierr = fmt.Errorf("%w: %w", errdefs.ErrDeadlineExceeded, ierr)
		}
		return fmt.Errorf("imagebuild: %s: import: %w", ref, classify(ierr))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// versionsDir holds, in an image, one file per component version the image
// reports (GET /v1/profiles): the file name is the component, the first
// line the version.
const versionsDir = "etc/genesis/versions"

// readVersions reads the version files of the root filesystem.
func readVersions(rootfs string) (map[string]string, error) {
	dir := filepath.Join(rootfs, versionsDir)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w: %w", versionsDir, errdefs.ErrInternal, err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !versionName.MatchString(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w: %w", versionsDir, e.Name(), errdefs.ErrInternal, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if v := strings.TrimSpace(line); v != "" && len(v) <= 128 {
			out[e.Name()] = v
		}
	}
	return out, nil
}

var versionName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
