package browser

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/chromedp/cdproto"
	cdpbrowser "github.com/chromedp/cdproto/browser"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// A browser profile (Chromium's user-data-dir: cookies, local storage,
// IndexedDB, preferences) is saved as a tar.gz artifact and loaded into
// another sandbox of the tenant. Chromium keeps part of that state in
// memory and its databases open, so both operations stop it first: a
// graceful Browser.close, which writes everything out, under the profile
// service's hold (ServiceHolder), and start it again after, waiting until
// it answers. Pages open in the browser are closed by this; the actions
// session is opened again at the next action.

// ServiceHolder stops a sandbox's profile service while an operation on
// its files runs (jobs.Services.Hold).
type ServiceHolder interface {
	Hold(ctx context.Context, sandboxID, name string, stop func(context.Context) error) (resume func(context.Context) error, err error)
}

// ArtifactSource opens an artifact of a tenant (a saved profile to load).
type ArtifactSource interface {
	Open(ctx context.Context, tenant, id string) (*sandbox.Artifact, *os.File, error)
}

// Error codes of the profile routes.
const (
	CodeNoProfileSupport = "browser_profile_unsupported"
	CodeBadProfile       = "invalid_browser_profile"
)

// Bounds of a profile archive to load.
const (
	maxProfileBytes   = 1 << 30 // content once extracted
	maxProfileEntries = 50000
)

// profileScratch are the parts of a user-data-dir not worth keeping:
// caches Chromium rebuilds, and the singleton files of a running browser
// (the last point outside the directory).
var profileScratch = []string{
	"Default/Cache", "Default/Code Cache", "Default/GPUCache", "Default/DawnGraphiteCache", "Default/DawnWebGPUCache",
	"GrShaderCache", "GraphiteDawnCache", "ShaderCache", "component_crx_cache", "extensions_crx_cache",
	"SingletonLock", "SingletonSocket", "SingletonCookie",
}

// ProfileResult is what saving or loading a profile did.
type ProfileResult struct {
	SandboxID string `json:"sandbox_id"`
	// Artifact is the saved profile (save) or the one loaded (load).
	Artifact *sandbox.Artifact `json:"artifact"`
	// Entries and Bytes count what a load extracted.
	Entries int   `json:"entries,omitempty"`
	Bytes   int64 `json:"bytes,omitempty"`
	// DurationMS is the whole operation, the browser's restart included.
	DurationMS int64 `json:"duration_ms"`
}

// profileTarget checks that the profile operations can run on sandbox id.
func (m *Manager) profileTarget(ctx context.Context, tenant, id string) (*Target, error) {
	t, err := m.attach(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	switch {
	case t.Spec.Service == "":
		t.Release()
		return nil, errdefs.WithCode(CodeNoProfileSupport, fmt.Errorf(
			"the profile of sandbox %s names no browser service (browser.service), so its browser profile cannot be saved or loaded: %w", id, errdefs.ErrFailedPrecondition))
	case m.cfg.Services == nil || t.Files == nil:
		t.Release()
		return nil, fmt.Errorf("browser profiles are not served by this service: %w", errdefs.ErrUnavailable)
	}
	return t, nil
}

// SaveProfile archives the browser profile of sandbox id as a tar.gz
// artifact called name (default browser-profile.tar.gz).
func (m *Manager) SaveProfile(ctx context.Context, tenant, id, name string) (*ProfileResult, error) {
	start := time.Now()
	if name == "" {
		name = "browser-profile.tar.gz"
	}
	if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, errdefs.Invalid("name %q must be a plain file name", name)
	}
	if m.cfg.Artifacts == nil {
		return nil, fmt.Errorf("artifacts are not kept on this service: %w", errdefs.ErrUnavailable)
	}
	t, err := m.profileTarget(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	var art *sandbox.Artifact
	err = m.withBrowserStopped(ctx, t, func(ctx context.Context) error {
		m.dropScratch(ctx, t)
		rc, err := t.Files.ReadArchive(ctx, t.Spec.ProfileDir)
		if err != nil {
			return err
		}
		defer rc.Close()
		pr, pw := io.Pipe()
		go func() {
			zw := gzip.NewWriter(pw)
			_, err := io.Copy(zw, rc)
			if cerr := zw.Close(); err == nil {
				err = cerr
			}
			pw.CloseWithError(err)
		}()
		art, err = m.cfg.Artifacts.KeepBytes(ctx, t.Tenant, t.SandboxID, name, pr)
		pr.CloseWithError(errors.New("browser profile: not read further"))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &ProfileResult{SandboxID: t.SandboxID, Artifact: art, DurationMS: time.Since(start).Milliseconds()}, nil
}

// LoadProfile replaces the browser profile of sandbox id with the saved
// profile artifactID (an artifact of the same tenant). The archive is
// checked before the browser is touched: one that is not a tar.gz of
// plain files and directories is refused and changes nothing.
func (m *Manager) LoadProfile(ctx context.Context, tenant, id, artifactID string) (*ProfileResult, error) {
	start := time.Now()
	if artifactID == "" {
		return nil, errdefs.Invalid("artifact_id is required")
	}
	if m.cfg.ArtifactSource == nil {
		return nil, fmt.Errorf("artifacts are not kept on this service: %w", errdefs.ErrUnavailable)
	}
	t, err := m.profileTarget(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	art, f, err := m.cfg.ArtifactSource.Open(ctx, tenant, artifactID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkProfileArchive(f, artifactID); err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rereading artifact %s: %v: %w", artifactID, err, errdefs.ErrInternal)
	}
	res := &ProfileResult{SandboxID: t.SandboxID, Artifact: art}
	err = m.withBrowserStopped(ctx, t, func(ctx context.Context) error {
		if err := m.clearProfile(ctx, t); err != nil {
			return err
		}
		x, err := t.Files.ExtractArchive(ctx, t.Spec.ProfileDir, maxProfileBytes, maxProfileEntries, art.Size, f)
		if err != nil {
			return fmt.Errorf("extracting the profile (the browser starts with an empty one): %w", err)
		}
		res.Entries, res.Bytes = x.Entries, x.Bytes
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.DurationMS = time.Since(start).Milliseconds()
	return res, nil
}

// withBrowserStopped ends the actions session, stops Chromium (gracefully,
// so that it writes its state), runs f, and starts Chromium again, waiting
// until it answers, whatever f did.
func (m *Manager) withBrowserStopped(ctx context.Context, t *Target, f func(context.Context) error) error {
	m.mu.Lock()
	s := m.sessions[t.SandboxID]
	delete(m.sessions, t.SandboxID)
	m.mu.Unlock()
	if s != nil {
		s.close()
	}
	resume, err := m.cfg.Services.Hold(ctx, t.SandboxID, t.Spec.Service, func(ctx context.Context) error { return closeBrowser(ctx, t) })
	if err != nil {
		return err
	}
	ferr := f(ctx)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.ReadyWait)
	defer cancel()
	if err := resume(rctx); err != nil {
		return errors.Join(ferr, fmt.Errorf("starting the browser of sandbox %s again: %w", t.SandboxID, err))
	}
	return ferr
}

// closeBrowser asks Chromium to close gracefully (CDP Browser.close, which
// chromedp sends only to a browser it started) and waits for its answer.
func closeBrowser(ctx context.Context, t *Target) error {
	w, err := dialCDP(ctx, t)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Write(ctx, &cdproto.Message{ID: 1, Method: cdpbrowser.CommandClose}); err != nil {
		return err
	}
	for {
		var msg cdproto.Message
		if err := w.Read(ctx, &msg); err != nil {
			if ctx.Err() != nil {
				return err
			}
			return nil // the browser went away before it answered, as it may
		}
		if msg.ID == 1 {
			if msg.Error != nil {
				return fmt.Errorf("chromium refused Browser.close: %s", msg.Error.Message)
			}
			return nil
		}
	}
}

// dropScratch removes the caches and singleton files of the (stopped)
// browser's profile.
func (m *Manager) dropScratch(ctx context.Context, t *Target) {
	for _, p := range profileScratch {
		err := t.Files.DeleteFile(ctx, agentproto.DeleteRequest{Path: path.Join(t.Spec.ProfileDir, p), Recursive: true})
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			m.cfg.Logger.Info("removing a browser cache before saving its profile", "sandbox", t.SandboxID, "path", p, "err", err)
		}
	}
}

// clearProfile empties the profile directory.
func (m *Manager) clearProfile(ctx context.Context, t *Target) error {
	list, err := t.Files.ListFiles(ctx, t.Spec.ProfileDir, 1, maxProfileEntries)
	if errors.Is(err, errdefs.ErrNotFound) {
		_, err = t.Files.Mkdir(ctx, agentproto.MkdirRequest{Path: t.Spec.ProfileDir})
		return err
	}
	if err != nil {
		return err
	}
	for _, e := range list.Entries {
		if err := t.Files.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.Path, Recursive: true}); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("clearing the profile directory: %w", err)
		}
	}
	return nil
}

// checkProfileArchive reads the whole archive: a gzip'd tar whose entries
// are plain files and directories with relative names inside it.
func checkProfileArchive(r io.Reader, id string) error {
	bad := func(format string, a ...any) error {
		return errdefs.WithCode(CodeBadProfile, fmt.Errorf("artifact %s is not a saved browser profile: "+format+": %w",
			append(append([]any{id}, a...), errdefs.ErrInvalidArgument)...))
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return bad("not gzip (%v)", err)
	}
	tr := tar.NewReader(zr)
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			if n == 0 {
				return bad("an empty archive")
			}
			return nil
		}
		if err != nil {
			return bad("a broken tar (%v)", err)
		}
		if n >= maxProfileEntries {
			return bad("more than %d entries", maxProfileEntries)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if path.IsAbs(h.Name) || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") {
			return bad("entry %q is outside the profile", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir:
		default:
			return bad("entry %q is not a file or directory", h.Name)
		}
		if total += h.Size; total > maxProfileBytes {
			return bad("more than %d bytes", maxProfileBytes)
		}
	}
}
