package skills

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Where a run sees its skill and writes its outputs.
const (
	// MountDir is where a run's sandbox has the revision, read-only.
	MountDir = "/skill"
	// OutputDir is where a script writes files to keep as artifacts.
	OutputDir = "/workspace/out"
	// DefaultProfile is the profile runs use unless the config names one.
	DefaultProfile = "skill-python-basic"
	// DefaultRunTimeout is a run's timeout when the request gives none.
	DefaultRunTimeout = 60 * time.Second
	// maxRunFiles bounds the files a run request uploads.
	maxRunFiles = 64
)

// Sources of a skill, with the risk each carries.
const (
	// SourceTenant is a skill a tenant uploaded: unsigned, risk medium.
	SourceTenant = "tenant"
)

type sandboxes interface {
	CreateSandbox(ctx context.Context, in control.CreateSandboxInput) (*sandbox.Sandbox, error)
	DeleteSandbox(ctx context.Context, tenant, id string) error
}

type execer interface {
	Exec(ctx context.Context, in jobs.ExecInput) (*jobs.ExecOutput, error)
}

type fileWriter interface {
	WriteFile(ctx context.Context, in files.WriteFileInput) (agentproto.FileWriteResult, error)
	Mkdir(ctx context.Context, tenant, id string, req agentproto.MkdirRequest) (agentproto.FileInfo, error)
}

type artifactLister interface {
	JobArtifacts(ctx context.Context, tenant, jobID string) (*sandbox.ArtifactCollection, []*sandbox.Artifact, error)
}

// Config wires a Manager.
type Config struct {
	Store     store.Skills
	Sandboxes sandboxes
	Jobs      execer
	Files     fileWriter
	Artifacts artifactLister
	// Dir is where revisions are unpacked, one directory per digest.
	Dir string
	// Profile is the profile runs use (default skill-python-basic).
	Profile string
	Limits  Limits
	// Ceiling is the highest risk a run may have (default high).
	Ceiling sandbox.RiskLevel
	// TenantCeiling, if set, lowers Ceiling for a tenant that set its own.
	TenantCeiling policy.TenantCeiling
	// AllowNetwork lets a skill that declares hosts reach exactly those
	// (an egress allowlist); without it such a skill's runs are refused.
	AllowNetwork bool
	// Audit, if set, records what the skills MCP server does (the API
	// routes are audited by the API).
	Audit  func(ctx context.Context, tenant, action, target, code string)
	Logger *slog.Logger
	Now    func() time.Time
}

// Manager keeps skill revisions and runs their scripts.
type Manager struct {
	cfg Config
	log *slog.Logger
	// mu guards locks: one per digest, so a digest is checked and
	// unpacked by one run at a time while other skills' runs go on.
	mu    sync.Mutex
	locks map[string]*digestLock
}

// New checks cfg and makes a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Sandboxes == nil || cfg.Jobs == nil || cfg.Files == nil || cfg.Artifacts == nil || cfg.Dir == "" {
		return nil, errdefs.Invalid("skills: missing store, sandboxes, jobs, files, artifacts or dir")
	}
	if cfg.Profile == "" {
		cfg.Profile = DefaultProfile
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.Ceiling == "" {
		cfg.Ceiling = sandbox.RiskHigh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("skills: %v: %w", err, errdefs.ErrUnavailable)
	}
	return &Manager{cfg: cfg, log: cfg.Logger.With("component", "skills")}, nil
}

// Revision is one immutable revision of a skill, as stored and returned.
type Revision struct {
	Tenant    string    `json:"tenant"`
	Name      string    `json:"name"`
	Revision  int64     `json:"revision"`
	Digest    string    `json:"digest"`
	Size      int64     `json:"size"`
	Source    string    `json:"source"`
	Manifest  Manifest  `json:"manifest"`
	Files     []File    `json:"files"`
	Report    Report    `json:"report"`
	CreatedAt time.Time `json:"created_at"`
}

func decodeRevision(r *store.SkillRevision) (*Revision, error) {
	var v Revision
	if err := json.Unmarshal(r.Doc, &v); err != nil {
		return nil, fmt.Errorf("skill %s revision %d: %v: %w", r.Name, r.Revision, err, errdefs.ErrInternal)
	}
	v.Tenant, v.Name, v.Revision, v.Digest, v.CreatedAt = r.Tenant, r.Name, r.Revision, r.Digest, r.CreatedAt
	return &v, nil
}

// Push stores a skill archive as a new revision of the skill its SKILL.md
// names (created false: the latest revision already had this content).
func (m *Manager) Push(ctx context.Context, tenant string, archive io.Reader) (*Revision, bool, error) {
	b, err := Parse(archive, m.cfg.Limits)
	if err != nil {
		return nil, false, err
	}
	canon, err := b.Canonical()
	if err != nil {
		return nil, false, err
	}
	rev := &Revision{Tenant: tenant, Name: b.Manifest.Name, Digest: b.Digest, Size: b.Size, Source: SourceTenant,
		Manifest: b.Manifest, Files: b.Files, Report: Analyze(b), CreatedAt: m.cfg.Now().UTC()}
	doc, err := json.Marshal(rev)
	if err != nil {
		return nil, false, err
	}
	out, created, err := m.cfg.Store.CreateSkillRevision(ctx, &store.SkillRevision{Tenant: tenant, Name: rev.Name, Digest: rev.Digest,
		CreatedAt: rev.CreatedAt, Doc: doc}, canon)
	if err != nil {
		return nil, false, err
	}
	if _, err := m.unpacked(ctx, out.Digest); err != nil {
		m.log.Warn("unpacking a pushed skill", "skill", out.Name, "digest", out.Digest, "err", err)
	}
	v, err := decodeRevision(out)
	return v, created, err
}

// Get returns a revision of a skill (0: the latest).
func (m *Manager) Get(ctx context.Context, tenant, name string, revision int64) (*Revision, error) {
	if !ValidName(name) {
		return nil, errdefs.WithCode("skill_not_found", fmt.Errorf("skill %q: %w", name, errdefs.ErrNotFound))
	}
	r, err := m.cfg.Store.GetSkillRevision(ctx, tenant, name, revision)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.WithCode("skill_not_found", err)
		}
		return nil, err
	}
	return decodeRevision(r)
}

// List returns the latest revision of each of the tenant's skills.
func (m *Manager) List(ctx context.Context, tenant string) ([]*Revision, error) {
	rs, err := m.cfg.Store.ListSkills(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return decodeAll(rs)
}

// Revisions returns every revision of a skill, newest first.
func (m *Manager) Revisions(ctx context.Context, tenant, name string) ([]*Revision, error) {
	rs, err := m.cfg.Store.ListSkillRevisions(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, errdefs.WithCode("skill_not_found", fmt.Errorf("skill %s: %w", name, errdefs.ErrNotFound))
	}
	return decodeAll(rs)
}

func decodeAll(rs []*store.SkillRevision) ([]*Revision, error) {
	out := make([]*Revision, 0, len(rs))
	for _, r := range rs {
		v, err := decodeRevision(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ReadFile returns one file of a revision, read from its verified copy.
func (m *Manager) ReadFile(ctx context.Context, rev *Revision, p string) ([]byte, error) {
	if _, ok := findFile(rev.Files, p); !ok {
		return nil, errdefs.WithCode("skill_file_not_found", fmt.Errorf("skill %s revision %d has no file %q: %w", rev.Name, rev.Revision, p, errdefs.ErrNotFound))
	}
	dir, err := m.unpacked(ctx, rev.Digest)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
}

func findFile(fs []File, p string) (*File, bool) {
	for i := range fs {
		if fs[i].Path == p {
			return &fs[i], true
		}
	}
	return nil, false
}

// dirOf is the directory a digest is unpacked in.
func (m *Manager) dirOf(digest string) (string, error) {
	hexSum, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexSum) != 64 || strings.Trim(hexSum, "0123456789abcdef") != "" {
		return "", fmt.Errorf("skill digest %q: %w", digest, errdefs.ErrInternal)
	}
	return filepath.Join(m.cfg.Dir, hexSum), nil
}

// unpacked returns the directory holding the revision with digest, after
// checking that its files still have that digest. A missing or altered
// copy is unpacked again from the stored archive, whose digest is checked
// too; a stored archive that no longer matches is an error
// (skill_digest_mismatch) and nothing runs.
func (m *Manager) unpacked(ctx context.Context, digest string) (string, error) {
	dir, err := m.dirOf(digest)
	if err != nil {
		return "", err
	}
	unlock := m.lockDigest(digest)
	defer unlock()
	got, err := dirDigest(dir)
	if err == nil && got == digest {
		return dir, nil
	}
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("a skill's unpacked copy does not match its digest; unpacking it again", "digest", digest, "found", got, "err", err)
	}
	archive, err := m.cfg.Store.SkillArchive(ctx, digest)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(m.cfg.Dir, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("skills: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := writeTree(tmp, archive); err != nil {
		return "", err
	}
	if got, err := dirDigest(tmp); err != nil || got != digest {
		return "", errdefs.WithCode("skill_digest_mismatch", fmt.Errorf(
			"the stored archive of %s has digest %s (%v); refusing to run it: %w", digest, got, err, errdefs.ErrInternal))
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("skills: %v: %w", err, errdefs.ErrUnavailable)
	}
	return dir, nil
}

// digestLock is the lock of one digest and how many hold or wait for it.
type digestLock struct {
	sync.Mutex
	refs int
}

// lockDigest locks digest and returns its unlock; locks of digests no one
// holds are dropped.
func (m *Manager) lockDigest(digest string) func() {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]*digestLock{}
	}
	l := m.locks[digest]
	if l == nil {
		l = &digestLock{}
		m.locks[digest] = l
	}
	l.refs++
	m.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.locks, digest)
		}
		m.mu.Unlock()
	}
}

// writeTree writes a canonical tar's files below dir: files 0644 or 0755,
// directories 0755, owned by the service. Paths are checked again (the
// archive comes from the store, not from the caller, but costs nothing to
// distrust) and written through an os.Root, so none lands outside dir.
func writeTree(dir string, archive []byte) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stored skill archive: %v: %w", err, errdefs.ErrInternal)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			return fmt.Errorf("stored skill archive entry %q: %w", h.Name, errdefs.ErrInternal)
		}
		if d := path.Dir(h.Name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		mode := os.FileMode(0o644)
		if h.Mode&0o111 != 0 {
			mode = 0o755
		}
		f, err := root.OpenFile(h.Name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := root.Chmod(h.Name, mode); err != nil { // past the umask
			return err
		}
	}
}

// dirDigest is the Digest of the regular files below dir. Anything else
// there (a link, a device) is an error: an unpacked revision holds none.
func dirDigest(dir string) (string, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(data)
		files = append(files, File{Path: filepath.ToSlash(rel), Executable: info.Mode()&0o111 != 0, SHA256: hex.EncodeToString(sum[:])})
		return nil
	})
	if err != nil {
		return "", err
	}
	return Digest(files), nil
}
