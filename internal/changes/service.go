package changes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// Root is the directory a diff compares and a patch's paths are relative
// to: the workspace, which snapshots keep.
const Root = config.DefaultFileRoot

// Bases a diff compares with besides a snapshot or sandbox id.
const (
	// BaseCreation is the workspace the sandbox started with: the
	// snapshot it was made from, or an empty one.
	BaseCreation = "creation"
)

// gateway is what the service needs of the file gateway.
type gateway interface {
	ReadArchive(ctx context.Context, tenant, id, dir string) (io.ReadCloser, context.CancelFunc, error)
	StatFile(ctx context.Context, tenant, id, path string) (files.FileInfo, error)
	ReadFile(ctx context.Context, tenant, id, method, path string, cond http.Header) (*agentclient.FileResponse, context.CancelFunc, error)
	WriteFile(ctx context.Context, in files.WriteFileInput) (files.FileWriteResult, error)
	MoveFile(ctx context.Context, tenant, id string, req files.MoveRequest) (files.FileInfo, error)
	DeleteFile(ctx context.Context, tenant, id string, req files.DeleteRequest) error
}

// sandboxes looks a tenant's sandbox up.
type sandboxes interface {
	GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
}

// snapshotSource opens a tenant's snapshot's workspace.
type snapshotSource interface {
	OpenWorkspace(ctx context.Context, tenant, id string) (io.ReadCloser, error)
}

// Config wires a Service.
type Config struct {
	Files     gateway
	Sandboxes sandboxes
	// Snapshots, if set, lets a diff compare with a snapshot (and a
	// sandbox made from one with its creation).
	Snapshots snapshotSource
	// Trace, if set, records each patch applied.
	Trace  trace.Recorder
	Limits Limits
	Logger *slog.Logger
}

// Service diffs and patches running sandboxes' workspaces.
type Service struct {
	cfg Config
	lim Limits
	log *slog.Logger

	mu    sync.Mutex
	locks map[string]*patchLock // one patch at a time per sandbox
}

// patchLock serializes the patches of one sandbox; it is dropped when the
// last one waiting is done.
type patchLock struct {
	sync.Mutex
	users int
}

// New validates cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Files == nil || cfg.Sandboxes == nil {
		return nil, errdefs.Mark(fmt.Errorf("changes: files and sandboxes are required"), errdefs.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, lim: cfg.Limits.withDefaults(), log: cfg.Logger, locks: map[string]*patchLock{}}, nil
}

// Limits returns the service's limits.
func (s *Service) Limits() Limits { return s.lim }

func (s *Service) lock(id string) func() {
	s.mu.Lock()
	l, ok := s.locks[id]
	if !ok {
		l = &patchLock{}
		s.locks[id] = l
	}
	l.users++
	s.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
}

// Diff compares the workspace of tenant's sandbox id with base:
// BaseCreation (also ""), BaseGit, a snapshot id of the tenant's
// ("snap_…") or another running sandbox of the tenant ("sbx_…").
func (s *Service) Diff(ctx context.Context, tenant, id, base string) (*Result, error) {
	sb, err := s.cfg.Sandboxes.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = BaseCreation
	}
	if base == BaseGit {
		return s.diffGit(ctx, tenant, id)
	}
	label := base
	if base == BaseCreation {
		if p := sb.Metadata["genesis.snapshot"]; p != "" {
			label = BaseCreation + " (" + p + ")"
			base = p
		}
	}
	baseTree, err := s.baseTree(ctx, tenant, id, base)
	if err != nil {
		if label != base && errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.WithCode("base_unavailable", errdefs.Mark(fmt.Errorf(
				"sandbox %s was made from snapshot %s, which is gone (deleted or expired); diff against another base", id, base), errdefs.ErrFailedPrecondition))
		}
		return nil, err
	}
	rc, cancel, err := s.cfg.Files.ReadArchive(ctx, tenant, id, Root)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer rc.Close()
	k := &keeper{lim: s.lim, skip: func(p string, sum [32]byte) bool {
		e, ok := baseTree[p]
		return ok && e.Sum == sum
	}}
	cur, err := readTree(ctx, rc, k)
	if err != nil {
		return nil, err
	}
	res := Diff(baseTree, cur, s.lim)
	res.Base = label
	return res, nil
}

// diffGit compares the workspace with its git repository's HEAD: the
// workspace and its .git directory are read in one pass.
func (s *Service) diffGit(ctx context.Context, tenant, id string) (*Result, error) {
	rc, cancel, err := s.cfg.Files.ReadArchive(ctx, tenant, id, Root)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer rc.Close()
	cur, repo, err := readTreeAndGit(ctx, rc, &keeper{lim: s.lim, gitIDs: true}, s.lim.MaxGitBytes)
	if err != nil {
		return nil, err
	}
	head, err := repo.headTree(ctx, &keeper{lim: s.lim}, cur)
	if err != nil {
		return nil, err
	}
	repo.dropIgnored(cur, head)
	res := Diff(head, cur, s.lim)
	res.Base = BaseGit
	return res, nil
}

// baseTree reads the tree a diff compares with.
func (s *Service) baseTree(ctx context.Context, tenant, id, base string) (Tree, error) {
	k := &keeper{lim: s.lim}
	switch {
	case base == BaseCreation:
		return Tree{}, nil
	case sandbox.ValidID("snap", base):
		if s.cfg.Snapshots == nil {
			return nil, errdefs.WithCode(CodeInvalidBase, errdefs.Mark(fmt.Errorf("snapshots are not served here; base %s cannot be read", base), errdefs.ErrNotImplemented))
		}
		rc, err := s.cfg.Snapshots.OpenWorkspace(ctx, tenant, base)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return readTree(ctx, rc, k)
	case sandbox.ValidID("sbx", base):
		if base == id {
			return nil, errdefs.WithCode(CodeInvalidBase, errdefs.Mark(fmt.Errorf("base %s is the sandbox itself", base), errdefs.ErrInvalidArgument))
		}
		rc, cancel, err := s.cfg.Files.ReadArchive(ctx, tenant, base, Root)
		if err != nil {
			return nil, err
		}
		defer cancel()
		defer rc.Close()
		return readTree(ctx, rc, k)
	case strings.HasPrefix(base, "snap_"):
		// No snapshot has this id, as none has one that is not well formed.
		return nil, fmt.Errorf("snapshot %.80q: %w", base, errdefs.ErrNotFound)
	case strings.HasPrefix(base, "sbx_"):
		return nil, fmt.Errorf("sandbox %.80q: %w", base, errdefs.ErrNotFound)
	default:
		return nil, errdefs.WithCode(CodeInvalidBase, errdefs.Mark(fmt.Errorf(
			"base %.80q is none of %q, %q, a snapshot id (snap_…) or a sandbox id (sbx_…)", base, BaseCreation, BaseGit), errdefs.ErrInvalidArgument))
	}
}

// PatchOptions change how a patch is applied.
type PatchOptions struct {
	// DryRun checks that the patch applies and changes nothing.
	DryRun bool
	// Actor is who applied it, for the trace ("api" when empty).
	Actor string
}

// PatchedFile is one file a patch wrote or removed.
type PatchedFile struct {
	Path   string `json:"path"`
	Status Status `json:"status"`
	// From is the file a renamed one came from.
	From string `json:"from,omitempty"`
	Size int64  `json:"size"`
	Mode string `json:"mode,omitempty"`
}

// PatchResult says what a patch changed (or would, for a dry run).
type PatchResult struct {
	Applied bool          `json:"applied"`
	DryRun  bool          `json:"dry_run"`
	Files   []PatchedFile `json:"files"`
}

// Patch applies a unified or git diff to the workspace of tenant's
// sandbox id, all or nothing: every file the patch reads is read and the
// whole patch applied in memory first, so a malformed patch, a path outside
// the workspace or a hunk that does not apply (patch_conflict, naming the
// file and hunk) changes nothing. The new contents are then written to
// staging files beside their targets and renamed into place, and removed
// files deleted last. Patches of one sandbox run one at a time.
func (s *Service) Patch(ctx context.Context, tenant, id string, text []byte, o PatchOptions) (*PatchResult, error) {
	p, err := ParsePatch(text, s.lim)
	if err != nil {
		return nil, err
	}
	if _, err := s.cfg.Sandboxes.GetSandbox(ctx, tenant, id); err != nil {
		return nil, err
	}
	unlock := s.lock(id)
	defer unlock()
	cur := map[string]Current{}
	left := s.lim.MaxPatchReadBytes // bytes of current files the patch may still read
	for _, rel := range p.Reads() {
		c, err := s.current(ctx, tenant, id, rel, left)
		if err != nil {
			return nil, err
		}
		left -= int64(len(c.Data))
		cur[rel] = c
	}
	ops, err := Apply(p, cur)
	if err != nil {
		return nil, err
	}
	res := &PatchResult{DryRun: o.DryRun, Files: patchedFiles(p, ops, cur)}
	if o.DryRun {
		return res, nil
	}
	if err := s.commit(ctx, tenant, id, ops); err != nil {
		return nil, err
	}
	res.Applied = true
	s.record(ctx, tenant, id, o.Actor, res)
	return res, nil
}

// current reads the state of one file a patch names, refusing one over
// left bytes: what the patch's files may still hold together.
func (s *Service) current(ctx context.Context, tenant, id, rel string, left int64) (Current, error) {
	abs := path.Join(Root, rel)
	info, err := s.cfg.Files.StatFile(ctx, tenant, id, abs)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		return Current{}, nil
	}
	if err != nil {
		return Current{}, err
	}
	switch {
	case info.Type != "file":
		return Current{}, errdefs.WithCode(CodePatchConflict, errdefs.Mark(fmt.Errorf(
			"%s is a %s, not a regular file; a patch changes regular files only; nothing was changed", rel, info.Type), errdefs.ErrConflict))
	case info.Size > s.lim.MaxTextBytes:
		return Current{}, errdefs.WithCode(CodePatchTooLarge, errdefs.Mark(fmt.Errorf(
			"%s is %d bytes, over the %d-byte limit of a file a patch changes; nothing was changed", rel, info.Size, s.lim.MaxTextBytes), errdefs.ErrTooLarge))
	case info.Size > left:
		return Current{}, s.readTooLarge()
	}
	mode, err := strconv.ParseUint(info.Mode, 8, 32)
	if err != nil {
		return Current{}, errdefs.Mark(fmt.Errorf("%s has mode %q", rel, info.Mode), errdefs.ErrInternal)
	}
	fr, cancel, err := s.cfg.Files.ReadFile(ctx, tenant, id, http.MethodGet, abs, nil)
	if err != nil {
		return Current{}, err
	}
	defer cancel()
	defer fr.Body.Close()
	data, err := io.ReadAll(io.LimitReader(fr.Body, s.lim.MaxTextBytes+1))
	if err != nil {
		return Current{}, errdefs.Mark(fmt.Errorf("reading %s: %v", rel, err), errdefs.ErrUnavailable)
	}
	if int64(len(data)) > s.lim.MaxTextBytes {
		return Current{}, errdefs.WithCode(CodePatchTooLarge, errdefs.Mark(fmt.Errorf(
			"%s grew over the %d-byte limit of a file a patch changes; nothing was changed", rel, s.lim.MaxTextBytes), errdefs.ErrTooLarge))
	}
	if int64(len(data)) > left {
		return Current{}, s.readTooLarge()
	}
	return Current{Exists: true, Data: data, Mode: fs.FileMode(mode).Perm()}, nil
}

// readTooLarge refuses a patch whose files are over MaxPatchReadBytes
// together.
func (s *Service) readTooLarge() error {
	return errdefs.WithCode(CodePatchTooLarge, errdefs.Mark(fmt.Errorf(
		"the files this patch changes are over %d bytes together, the limit of one patch; split it; nothing was changed", s.lim.MaxPatchReadBytes), errdefs.ErrTooLarge))
}

// commit writes ops: every new content to a staging file beside its
// target first (removed again if any fails), then renames them into place,
// then deletes.
func (s *Service) commit(ctx context.Context, tenant, id string, ops []Op) error {
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	type staged struct{ tmp, target string }
	var done []staged
	cleanup := func() {
		cctx := context.WithoutCancel(ctx)
		for _, f := range done {
			if err := s.cfg.Files.DeleteFile(cctx, tenant, id, files.DeleteRequest{Path: f.tmp}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
				s.log.Warn("removing a staged patch file", "sandbox", id, "path", f.tmp, "err", err)
			}
		}
	}
	for i, op := range ops {
		if op.Delete {
			continue
		}
		target := path.Join(Root, op.Path)
		tmp := path.Join(path.Dir(target), fmt.Sprintf(".genesis-patch-%x-%d", tok, i))
		_, err := s.cfg.Files.WriteFile(ctx, files.WriteFileInput{Tenant: tenant, SandboxID: id, Path: tmp,
			Mode: fmt.Sprintf("%04o", op.Mode.Perm()), Size: int64(len(op.Data)), Body: bytes.NewReader(op.Data)})
		if err != nil {
			cleanup()
			return fmt.Errorf("writing %s: %w", op.Path, err)
		}
		done = append(done, staged{tmp: tmp, target: target})
	}
	for i, f := range done {
		if _, err := s.cfg.Files.MoveFile(ctx, tenant, id, files.MoveRequest{From: f.tmp, To: f.target, Overwrite: true}); err != nil {
			done = done[i:]
			cleanup()
			return fmt.Errorf("moving %s into place after %d of %d files: %w", f.target, i, len(done), err)
		}
	}
	for _, op := range ops {
		if !op.Delete {
			continue
		}
		err := s.cfg.Files.DeleteFile(ctx, tenant, id, files.DeleteRequest{Path: path.Join(Root, op.Path)})
		if err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("deleting %s after the other files were written: %w", op.Path, err)
		}
	}
	return nil
}

// patchedFiles describes what ops do, in the patch's order.
func patchedFiles(p *Patch, ops []Op, cur map[string]Current) []PatchedFile {
	written := map[string]Op{}
	for _, op := range ops {
		if !op.Delete {
			written[op.Path] = op
		}
	}
	out := []PatchedFile{}
	for _, fp := range p.Files {
		switch {
		case fp.To == "":
			out = append(out, PatchedFile{Path: fp.From, Status: Deleted})
		case fp.From == "":
			op := written[fp.To]
			out = append(out, PatchedFile{Path: fp.To, Status: Added, Size: int64(len(op.Data)), Mode: fmt.Sprintf("%04o", op.Mode.Perm())})
		default:
			op := written[fp.To]
			pf := PatchedFile{Path: fp.To, Status: Modified, Size: int64(len(op.Data)), Mode: fmt.Sprintf("%04o", op.Mode.Perm())}
			if fp.From != fp.To {
				pf.From, pf.Status = fp.From, Renamed
			} else if bytes.Equal(op.Data, cur[fp.From].Data) {
				pf.Status = ModeChanged
			}
			out = append(out, pf)
		}
	}
	return out
}

// record puts an applied patch in the sandbox's trace.
func (s *Service) record(ctx context.Context, tenant, id, actor string, res *PatchResult) {
	if s.cfg.Trace == nil {
		return
	}
	if actor == "" {
		actor = trace.ActorAPI
	}
	paths := make([]string, 0, len(res.Files))
	for _, f := range res.Files {
		paths = append(paths, f.Path)
	}
	if len(paths) > 100 {
		paths = append(paths[:100], fmt.Sprintf("… and %d more", len(paths)-100))
	}
	b, err := json.Marshal(map[string]any{"files": len(res.Files), "paths": paths})
	if err != nil {
		return
	}
	s.cfg.Trace.Record(context.WithoutCancel(ctx), tenant, id, trace.Event{Actor: actor, Kind: trace.KindFilesPatched, Data: b})
}
