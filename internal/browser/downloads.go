package browser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// Files is the sandbox's file access as the downloads listing needs it
// (the agent's client).
type Files interface {
	ListFiles(ctx context.Context, path string, depth, limit int) (agentproto.FileList, error)
	ReadFile(ctx context.Context, method, path string, cond http.Header) (*agentclient.FileResponse, error)
	// For saving and loading a browser profile.
	ReadArchive(ctx context.Context, dir string) (io.ReadCloser, error)
	ExtractArchive(ctx context.Context, dir string, maxBytes int64, maxEntries int, size int64, body io.Reader) (agentproto.ExtractResult, error)
	DeleteFile(ctx context.Context, req agentproto.DeleteRequest) error
	Mkdir(ctx context.Context, req agentproto.MkdirRequest) (agentproto.FileInfo, error)
}

// maxDownloads bounds the files one downloads listing reads.
const maxDownloads = 200

// Download is a file the browser downloaded.
type Download struct {
	Name    string
	Path    string
	Size    int64
	SHA256  string
	ModTime time.Time
	// Partial is set while Chromium still writes it (.crdownload); it has
	// no digest then and is never kept.
	Partial bool
	// Artifact is set when the file was kept.
	Artifact *sandbox.Artifact
}

// Downloads lists the files of the sandbox's downloads directory with
// their sha256, newest first. With keep, the complete files whose names
// are in names (all when names is empty) are kept as artifacts.
func (m *Manager) Downloads(ctx context.Context, tenant, id string, keep bool, names []string) ([]Download, error) {
	t, err := m.attach(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	if t.Files == nil {
		return nil, fmt.Errorf("browser: no file access to sandbox %s: %w", id, errdefs.ErrInternal)
	}
	if keep && m.cfg.Artifacts == nil {
		return nil, fmt.Errorf("downloads are not kept on this service: %w", errdefs.ErrUnavailable)
	}
	list, err := t.Files.ListFiles(ctx, t.Spec.DownloadsDir, 1, maxDownloads)
	if errors.Is(err, errdefs.ErrNotFound) {
		return []Download{}, nil // nothing downloaded yet
	}
	if err != nil {
		return nil, err
	}
	out := []Download{}
	for _, e := range list.Entries {
		if e.Type != agentproto.FileTypeFile {
			continue
		}
		d := Download{Name: e.Name, Path: e.Path, Size: e.Size, ModTime: e.ModTime, Partial: strings.HasSuffix(e.Name, ".crdownload")}
		if !d.Partial {
			want := keep && (len(names) == 0 || slices.Contains(names, e.Name))
			if err := m.digest(ctx, t, &d, want); err != nil {
				return nil, fmt.Errorf("reading download %s: %w", e.Name, err)
			}
		}
		out = append(out, d)
	}
	for _, n := range names {
		if !slices.ContainsFunc(out, func(d Download) bool { return d.Name == n && !d.Partial }) {
			return nil, errdefs.WithCode("no_such_download", fmt.Errorf("no complete download %q in %s: %w", n, t.Spec.DownloadsDir, errdefs.ErrNotFound))
		}
	}
	slices.SortFunc(out, func(a, b Download) int { return b.ModTime.Compare(a.ModTime) })
	m.traceDownloads(ctx, t, out)
	return out, nil
}

// noticeDownloads lists a sandbox's downloads when Chromium reports one
// complete, so the trace records it then (traceDownloads), not only when a
// caller lists them. A file still named .crdownload (Chromium renames it
// about when it reports) is looked at again, a few times.
func (m *Manager) noticeDownloads(tenant, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 5 {
		dls, err := m.Downloads(ctx, tenant, id, false, nil)
		if err != nil || !slices.ContainsFunc(dls, func(d Download) bool { return d.Partial }) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// traceDownloads records in the trace each complete download the service
// sees for the first time (by name and sha256), and each it keeps, as
// browser.download (name, path, size, sha256, and the artifact once kept).
func (m *Manager) traceDownloads(ctx context.Context, t *Target, dls []Download) {
	if m.cfg.Trace == nil {
		return
	}
	for _, d := range dls {
		if d.Partial {
			continue
		}
		key := t.SandboxID + "\x00" + d.Name + "\x00" + d.SHA256
		m.mu.Lock()
		seen := m.downloads[key]
		first := seen == 0
		kept := d.Artifact != nil && seen < 2
		if first || kept {
			m.downloads[key] = 1
			if d.Artifact != nil {
				m.downloads[key] = 2
			}
		}
		m.mu.Unlock()
		if !first && !kept {
			continue
		}
		data := map[string]any{"name": d.Name, "path": d.Path, "size": d.Size, "sha256": d.SHA256}
		if d.Artifact != nil {
			data["artifact"] = map[string]any{"id": d.Artifact.ID, "sha256": d.Artifact.SHA256, "size": d.Artifact.Size, "mime": d.Artifact.MIME}
		}
		m.record(ctx, &Target{Tenant: t.Tenant, SandboxID: t.SandboxID}, trace.ActorSystem, trace.KindBrowserDownload, data)
	}
}

// digest reads a download once: its sha256, and its bytes into the
// artifact store when keep.
func (m *Manager) digest(ctx context.Context, t *Target, d *Download, keep bool) error {
	fr, err := t.Files.ReadFile(ctx, http.MethodGet, d.Path, nil)
	if err != nil {
		return err
	}
	defer fr.Body.Close()
	if fr.Status != http.StatusOK {
		return fmt.Errorf("agent answered %d: %w", fr.Status, errdefs.ErrInternal)
	}
	h := sha256.New()
	r := io.TeeReader(fr.Body, h)
	if keep {
		a, err := m.cfg.Artifacts.KeepBytes(ctx, t.Tenant, t.SandboxID, d.Name, r)
		if err != nil {
			return err
		}
		d.Artifact = a
	} else if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
	return nil
}
