package artifacts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Keeper: a job may name files (globs below the workspace) to keep.
// When it ends, whatever its exit, the matching regular files are read out
// of the sandbox through its agent (the same confined listing and read the
// file API uses; never a host path into the container) and stored in the
// content-addressed blob store under the data dir. The records outlive the
// sandbox until they expire; Sweep then removes them and every blob no
// record uses.

// artifactCollectTimeout bounds the collection of one job's artifacts.
const artifactCollectTimeout = 10 * time.Minute

// artifactReaders is how many files of one job are read at once.
const artifactReaders = 4

// artifactGCBatch is how many expired records one GC step removes.
const artifactGCBatch = 500

// records is what the keeper needs of the store.
type records interface {
	store.Artifacts
	GetJob(ctx context.Context, tenant, id string) (*sandbox.Job, error)
}

// sandboxes is what the keeper needs of the control layer.
type sandboxes interface {
	Attach(ctx context.Context, tenant, id string, o control.AttachOptions) (*control.Attachment, error)
}

// KeeperConfig wires a Keeper.
type KeeperConfig struct {
	// Blobs holds the artifacts' content.
	Blobs *Blobs
	// Store holds the artifact records.
	Store records
	// Sandboxes attaches to the sandbox a job ran in (a *control.Service).
	Sandboxes sandboxes
	// Limits are limits.artifacts of the configuration.
	Limits config.ArtifactLimits
	// Retention is how long artifacts are kept (intervals.artifact_retention).
	Retention time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Keeper keeps the artifacts of jobs: it records what a job asks for,
// reads the matching files out of the sandbox when the job ends, serves
// them, and removes them when they expire.
type Keeper struct {
	blobs *Blobs
	store records
	sbx   sandboxes
	lim   config.ArtifactLimits
	ttl   time.Duration
	now   func() time.Time
	log   *slog.Logger
	// gcMu is held shared from a blob's Put to its record's insert, and
	// exclusively while GC decides a blob is unused and removes it, so a
	// blob is never removed between its write and its record.
	gcMu sync.RWMutex
	busy sync.Map // job id → struct{} while its artifacts are collected
}

// NewKeeper validates cfg and returns a Keeper.
func NewKeeper(cfg KeeperConfig) (*Keeper, error) {
	switch {
	case cfg.Blobs == nil:
		return nil, fmt.Errorf("artifacts: nil blobs: %w", errdefs.ErrInvalidArgument)
	case cfg.Store == nil:
		return nil, fmt.Errorf("artifacts: nil store: %w", errdefs.ErrInvalidArgument)
	case cfg.Sandboxes == nil:
		return nil, fmt.Errorf("artifacts: nil sandboxes: %w", errdefs.ErrInvalidArgument)
	case cfg.Retention <= 0:
		return nil, errdefs.Invalid("artifacts: retention %v must be positive", cfg.Retention)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	return &Keeper{blobs: cfg.Blobs, store: cfg.Store, sbx: cfg.Sandboxes, lim: cfg.Limits, ttl: cfg.Retention,
		now: func() time.Time { return now().UTC() }, log: cfg.Logger}, nil
}

// Name names the keeper's control hook.
func (s *Keeper) Name() string { return "artifacts" }

// Sweep removes expired artifacts and unused blobs (a control.SweepHook).
func (s *Keeper) Sweep(ctx context.Context, now time.Time, startup bool) {
	records, blobs := s.collectGarbage(ctx, now, startup)
	if records+blobs > 0 {
		s.log.Info("artifacts expired", "artifacts_expired", records, "blobs_removed", blobs)
	}
}

func invalid(format string, args ...any) error {
	return errdefs.Invalid(format, args...)
}

// Validate checks an artifact request before its job is recorded.
func (s *Keeper) Validate(spec *sandbox.ArtifactSpec) error {
	if spec == nil {
		return nil
	}
	lim := s.lim
	switch {
	case len(spec.Paths) == 0:
		return invalid("artifacts.paths must name at least one pattern")
	case len(spec.Paths) > MaxGlobs:
		return invalid("artifacts.paths has %d patterns, at most %d are allowed", len(spec.Paths), MaxGlobs)
	case spec.MaxFileBytes < 0 || spec.MaxFileBytes > lim.MaxFileBytes:
		return invalid("artifacts.max_file_bytes must be between 1 and %d, got %d", lim.MaxFileBytes, spec.MaxFileBytes)
	case spec.MaxTotalBytes < 0 || spec.MaxTotalBytes > lim.MaxTotalBytes:
		return invalid("artifacts.max_total_bytes must be between 1 and %d, got %d", lim.MaxTotalBytes, spec.MaxTotalBytes)
	}
	for _, p := range spec.Paths {
		if _, err := ParseGlob(agentproto.DefaultFileRoot, p); err != nil {
			return err
		}
	}
	return nil
}

// Plan records the artifact request of a job just recorded.
func (s *Keeper) Plan(ctx context.Context, job *sandbox.Job, spec *sandbox.ArtifactSpec) error {
	if spec == nil {
		return nil
	}
	return s.store.PutArtifactCollection(ctx, &sandbox.ArtifactCollection{
		JobID: job.ID, Tenant: job.Tenant, SandboxID: job.SandboxID, Spec: *spec, State: sandbox.ArtifactsPending,
		CreatedAt: job.CreatedAt, ExpiresAt: job.CreatedAt.Add(s.ttl),
	})
}

// Collect keeps the artifacts of a job that has ended, if it asked
// for any and they are not collected yet. It records the outcome (and any
// failure) on the job's collection record and never fails the job itself.
// A ctx canceled from outside (service shutdown) leaves the request pending,
// to be collected when the job's exit is recorded again after a restart.
func (s *Keeper) Collect(ctx context.Context, jobID string) {
	c, err := s.store.GetArtifactCollection(ctx, "", jobID)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("reading artifact request", "job", jobID, "err", err)
		}
		return
	}
	if c.State != sandbox.ArtifactsPending {
		return
	}
	if _, dup := s.busy.LoadOrStore(jobID, struct{}{}); dup {
		return
	}
	defer s.busy.Delete(jobID)
	cctx, cancel := context.WithTimeout(ctx, artifactCollectTimeout)
	defer cancel()
	start := time.Now()
	err = s.gather(cctx, c)
	if ctx.Err() != nil {
		return
	}
	done := s.now()
	c.FinishedAt, c.State = &done, sandbox.ArtifactsDone
	if err != nil {
		c.State, c.Error = sandbox.ArtifactsFailed, err.Error()
	}
	if perr := s.store.PutArtifactCollection(ctx, c); perr != nil {
		s.log.Error("recording artifact collection", "job", jobID, "err", perr)
	}
	s.log.Debug("artifacts collected", "job", jobID, "collected", c.Collected, "skipped", len(c.Skipped),
		"bytes", c.CollectedBytes, "duration_ms", time.Since(start).Milliseconds(), "err", err)
}

// matchedFile is a regular file an artifact pattern matched.
type matchedFile struct {
	abs, rel string
	size     int64
}

// gather finds and keeps the files of c, updating its counts.
func (s *Keeper) gather(ctx context.Context, c *sandbox.ArtifactCollection) error {
	lim := s.lim
	maxFile, maxTotal := lim.MaxFileBytes, lim.MaxTotalBytes
	if c.Spec.MaxFileBytes > 0 {
		maxFile = c.Spec.MaxFileBytes
	}
	if c.Spec.MaxTotalBytes > 0 {
		maxTotal = c.Spec.MaxTotalBytes
	}
	att, err := s.sbx.Attach(ctx, c.Tenant, c.SandboxID, control.AttachOptions{})
	if err != nil {
		return fmt.Errorf("cannot collect artifacts: %w", err)
	}
	att.Release()
	ag := att.Agent
	files, err := findArtifacts(ctx, ag, c.Spec.Paths)
	if err != nil {
		return err
	}
	// Decide by the listed sizes, in path order, what fits the caps; then
	// read the chosen files a few at a time. A file may grow between the
	// listing and its read: each gets its listed size plus an equal share
	// of the unused total, so the job's total cap holds whatever happens.
	skip := func(f matchedFile, reason, detail string) {
		c.Skipped = append(c.Skipped, sandbox.SkippedArtifact{Path: f.rel, Size: f.size, Reason: reason, Detail: detail})
	}
	var picks []matchedFile
	var reserved int64
	for _, f := range files {
		switch {
		case len(picks) >= lim.MaxFiles:
			skip(f, sandbox.SkipTooManyFiles, fmt.Sprintf("a job keeps at most %d files", lim.MaxFiles))
		case f.size > maxFile:
			skip(f, sandbox.SkipFileTooLarge, fmt.Sprintf("%d bytes is over the %d-byte per-file cap", f.size, maxFile))
		case reserved+f.size > maxTotal:
			skip(f, sandbox.SkipTotalTooLarge, fmt.Sprintf("would take the job over its %d-byte total cap", maxTotal))
		default:
			reserved += f.size
			picks = append(picks, f)
		}
	}
	if len(picks) == 0 {
		return nil
	}
	share := (maxTotal - reserved) / int64(len(picks))
	kept := make([]*sandbox.Artifact, len(picks))
	errs := make([]error, len(picks))
	sem := make(chan struct{}, artifactReaders)
	var wg sync.WaitGroup
	for i, f := range picks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			kept[i], errs[i] = s.keep(ctx, ag, c, f, min(maxFile, f.size+share))
		})
	}
	wg.Wait()
	var fatal error
	for i, f := range picks {
		err := errs[i]
		switch {
		case err == nil:
			c.Collected++
			c.CollectedBytes += kept[i].Size
		case errors.Is(err, errdefs.ErrTooLarge):
			skip(f, sandbox.SkipFileTooLarge, "the file grew over its cap while it was read")
		case ctx.Err() != nil, errors.Is(err, errdefs.ErrUnavailable):
			if fatal == nil {
				fatal = fmt.Errorf("collecting %s: %w", f.rel, err)
			}
		default:
			skip(f, sandbox.SkipUnreadable, err.Error())
		}
	}
	return fatal
}

// findArtifacts lists, through the agent, the regular files the patterns
// match (symlinks are never followed), sorted by path without duplicates.
func findArtifacts(ctx context.Context, ag *agentclient.Client, patterns []string) ([]matchedFile, error) {
	root := agentproto.DefaultFileRoot
	seen := map[string]bool{}
	var out []matchedFile
	for _, p := range patterns {
		g, err := ParseGlob(root, p)
		if err != nil {
			return nil, err
		}
		depth := g.Depth()
		if depth < 0 {
			depth = agentproto.MaxListDepth
		}
		list, err := ag.ListFiles(ctx, agentproto.JoinRoot(root, cmp.Or(g.Base(), ".")), depth, agentproto.DefaultListLimit)
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument) {
			continue // nothing there (or not a directory): no match
		}
		if err != nil {
			return nil, fmt.Errorf("listing artifacts of %q: %w", p, err)
		}
		if list.Truncated {
			return nil, fmt.Errorf("artifact pattern %q: more than %d entries below %s; use a narrower pattern: %w",
				p, agentproto.DefaultListLimit, list.Path, errdefs.ErrFailedPrecondition)
		}
		for _, e := range list.Entries {
			rel, ok := strings.CutPrefix(e.Path, root+"/")
			if e.Type != agentproto.FileTypeFile || !ok || seen[rel] || !g.Match(rel) {
				continue
			}
			seen[rel] = true
			out = append(out, matchedFile{abs: e.Path, rel: rel, size: e.Size})
		}
	}
	slices.SortFunc(out, func(a, b matchedFile) int { return strings.Compare(a.rel, b.rel) })
	return out, nil
}

// keep copies one file into the blob store and records it. More
// than maxBytes bytes fail with ErrTooLarge and keep nothing.
func (s *Keeper) keep(ctx context.Context, ag *agentclient.Client, c *sandbox.ArtifactCollection, f matchedFile, maxBytes int64) (*sandbox.Artifact, error) {
	fr, err := ag.ReadFile(ctx, http.MethodGet, f.abs, nil)
	if err != nil {
		return nil, err
	}
	defer fr.Body.Close()
	if fr.Status != http.StatusOK {
		return nil, fmt.Errorf("reading %s: agent answered %d: %w", f.rel, fr.Status, errdefs.ErrInternal)
	}
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	put, err := s.blobs.Put(fr.Body, maxBytes)
	if err != nil {
		return nil, err
	}
	now := s.now()
	a := &sandbox.Artifact{
		ID: sandbox.NewID("art"), Tenant: c.Tenant, JobID: c.JobID, SandboxID: c.SandboxID, Path: f.rel,
		Name: path.Base(f.rel), Size: put.Size, SHA256: put.SHA256, MIME: DetectMIME(f.rel, put.Head),
		CreatedAt: now, ExpiresAt: now.Add(s.ttl),
	}
	if err := s.store.CreateArtifact(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// JobArtifacts returns the artifact request of a job of tenant and the
// artifacts kept so far. A job that asked for none has a nil collection.
func (s *Keeper) JobArtifacts(ctx context.Context, tenant, jobID string) (*sandbox.ArtifactCollection, []*sandbox.Artifact, error) {
	if !sandbox.ValidID("job", jobID) {
		return nil, nil, fmt.Errorf("job %q: %w", jobID, errdefs.ErrNotFound)
	}
	c, err := s.store.GetArtifactCollection(ctx, tenant, jobID)
	if errors.Is(err, errdefs.ErrNotFound) {
		if _, err := s.store.GetJob(ctx, tenant, jobID); err != nil {
			return nil, nil, err
		}
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	list, err := s.store.ListArtifacts(ctx, tenant, jobID)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	list = slices.DeleteFunc(list, func(a *sandbox.Artifact) bool { return !now.Before(a.ExpiresAt) })
	// Files are read concurrently; list them in path order.
	slices.SortStableFunc(list, func(a, b *sandbox.Artifact) int { return strings.Compare(a.Path, b.Path) })
	return c, list, nil
}

// Summary returns the artifact request of a job and its outcome,
// or nil when the job asked for none (or it cannot be read: the job record
// is served without it).
func (s *Keeper) Summary(ctx context.Context, jobID string) *sandbox.ArtifactCollection {
	c, err := s.store.GetArtifactCollection(ctx, "", jobID)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("reading artifact collection", "job", jobID, "err", err)
		}
		return nil
	}
	return c
}

// Get returns an unexpired artifact of tenant.
func (s *Keeper) Get(ctx context.Context, tenant, id string) (*sandbox.Artifact, error) {
	if !sandbox.ValidID("art", id) {
		return nil, fmt.Errorf("artifact %q: %w", id, errdefs.ErrNotFound)
	}
	a, err := s.store.GetArtifact(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if !s.now().Before(a.ExpiresAt) {
		return nil, errdefs.WithCode("artifact_expired", fmt.Errorf("artifact %s expired at %s: %w",
			id, a.ExpiresAt.Format(time.RFC3339), errdefs.ErrNotFound))
	}
	return a, nil
}

// Open returns an artifact of tenant and its content. The caller
// closes the file.
func (s *Keeper) Open(ctx context.Context, tenant, id string) (*sandbox.Artifact, *os.File, error) {
	a, err := s.Get(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	f, err := s.blobs.Open(a.SHA256)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			err = fmt.Errorf("artifact %s: its content is missing from the store: %w", id, errdefs.ErrInternal)
		}
		return nil, nil, err
	}
	return a, f, nil
}

// OpenForExport opens an artifact of tenant for a trace export
// (trace.ExportConfig.OpenArtifact): the extension of its path, its size
// and its content, which the caller closes.
func (s *Keeper) OpenForExport(ctx context.Context, tenant, id string) (string, int64, io.ReadCloser, error) {
	a, f, err := s.Open(ctx, tenant, id)
	if err != nil {
		return "", 0, nil, err
	}
	return path.Ext(a.Path), a.Size, f, nil
}

// collectGarbage removes expired artifact records and the blobs
// no record uses any more; at startup it also sweeps every blob (a crash
// between a blob's write and its record leaves one unused). It returns
// the number of records and blobs removed.
func (s *Keeper) collectGarbage(ctx context.Context, now time.Time, sweep bool) (records, blobs int) {
	var candidates []string
	for {
		gone, err := s.store.DeleteExpiredArtifacts(ctx, now, artifactGCBatch)
		if err != nil {
			s.log.Warn("removing expired artifacts", "err", err)
			break
		}
		records += len(gone)
		for _, a := range gone {
			candidates = append(candidates, a.SHA256)
		}
		if len(gone) < artifactGCBatch {
			break
		}
	}
	if sweep {
		all, err := s.blobs.List(time.Hour)
		if err != nil {
			s.log.Warn("listing artifact blobs", "err", err)
		}
		candidates = append(candidates, all...)
	}
	slices.Sort(candidates)
	for _, sum := range slices.Compact(candidates) {
		if s.removeBlobIfUnused(ctx, sum) {
			blobs++
		}
	}
	return records, blobs
}

func (s *Keeper) removeBlobIfUnused(ctx context.Context, sum string) bool {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	inUse, err := s.store.ArtifactBlobInUse(ctx, sum)
	if err != nil || inUse || !s.blobs.Has(sum) {
		return false
	}
	if err := s.blobs.Remove(sum); err != nil {
		s.log.Warn("removing artifact blob", "sha256", sum, "err", err)
		return false
	}
	return true
}

// KeepBytes keeps what r holds as an artifact of the sandbox that no job
// made (a browser screenshot or download): name is its file name, and the
// per-file cap applies.
func (s *Keeper) KeepBytes(ctx context.Context, tenant, sandboxID, name string, r io.Reader) (*sandbox.Artifact, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return nil, errdefs.Invalid("artifact name %q must be a plain file name", name)
	}
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	put, err := s.blobs.Put(r, s.lim.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	now := s.now()
	a := &sandbox.Artifact{
		ID: sandbox.NewID("art"), Tenant: tenant, SandboxID: sandboxID, Path: name, Name: name,
		Size: put.Size, SHA256: put.SHA256, MIME: DetectMIME(name, put.Head), CreatedAt: now, ExpiresAt: now.Add(s.ttl),
	}
	if err := s.store.CreateArtifact(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}
