package trace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"genesis.dev/sandbox/api"
)

// ExportConfig is what writing an export needs besides the trace.
type ExportConfig struct {
	// OpenArtifact opens an artifact the events name: its file name
	// extension (".png"), its size and its content. An artifact it cannot
	// open is listed in the manifest as missing.
	OpenArtifact func(ctx context.Context, tenant, id string) (ext string, size int64, content io.ReadCloser, err error)
	// Player, if set, builds the offline player (player.html) from its
	// data, a JSON object {"sandbox_id", "events", "ext"}; an error leaves
	// the player out (a binary built without the front-end has none).
	Player func(data []byte) ([]byte, error)
	// Logger notes a player left out (default: discard).
	Logger *slog.Logger
}

// Export is a sandbox's trace read for export: its events (as of the
// read) and the artifacts they name.
type Export struct {
	tenant, id string
	now        time.Time
	events     bytes.Buffer // events.jsonl
	n          int
	artifacts  []string // ids, in the order the events name them
}

// Export reads tenant's trace of sandboxID for an export. An error here
// (no such trace) comes before anything is written.
func (s *Store) Export(tenant, sandboxID string) (*Export, error) {
	x := &Export{tenant: tenant, id: sandboxID, now: s.now().UTC()}
	seen := map[string]bool{}
	for after := int64(0); ; {
		evs, _, err := s.Read(tenant, sandboxID, after, 1000)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return x, nil
		}
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				return nil, err
			}
			x.events.Write(b)
			x.events.WriteByte('\n')
			// An event names artifacts as {"artifact": {"id": …}} (a
			// screenshot, a download, a video segment) and a screenshot's
			// {"thumbnail": {"id": …}}.
			type ref struct {
				ID string `json:"id"`
			}
			var d struct {
				Artifact  ref `json:"artifact"`
				Thumbnail ref `json:"thumbnail"`
			}
			if json.Unmarshal(e.Data, &d) == nil {
				for _, aid := range []string{d.Artifact.ID, d.Thumbnail.ID} {
					if aid != "" && !seen[aid] {
						seen[aid] = true
						x.artifacts = append(x.artifacts, aid)
					}
				}
			}
			after = e.Seq
			x.n++
		}
	}
}

// WriteTo writes the export to w as a tar.gz: events.jsonl, the artifacts
// the events name (artifacts/<id><ext>), player.html and last
// manifest.json (api.TraceManifest) with every file's size and sha256. On
// an error the archive is cut short, without its manifest.
func (x *Export) WriteTo(ctx context.Context, w io.Writer, cfg ExportConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	man := api.TraceManifest{SandboxID: x.id, ExportedAt: x.now, Events: x.n}
	add := func(name string, size int64, rd io.Reader, artifactID string) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: x.now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		h := sha256.New()
		if _, err := io.CopyN(io.MultiWriter(tw, h), rd, size); err != nil {
			return err
		}
		man.Files = append(man.Files, api.TraceManifestFile{Path: name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil)), ArtifactID: artifactID})
		return nil
	}
	if err := add("events.jsonl", int64(x.events.Len()), bytes.NewReader(x.events.Bytes()), ""); err != nil {
		return err
	}
	exts := map[string]string{}
	for _, aid := range x.artifacts {
		ext, size, f, err := cfg.OpenArtifact(ctx, x.tenant, aid)
		if err != nil {
			man.Missing = append(man.Missing, aid)
			continue
		}
		exts[aid] = ext
		err = add("artifacts/"+aid+ext, size, f, aid)
		f.Close()
		if err != nil {
			return err
		}
	}
	if cfg.Player != nil {
		if page, err := x.player(cfg.Player, exts); err == nil {
			if err := add("player.html", int64(len(page)), bytes.NewReader(page), ""); err != nil {
				return err
			}
		} else {
			cfg.Logger.Debug("trace export without its player", "sandbox", x.id, "err", err)
		}
	}
	mb, _ := json.MarshalIndent(man, "", "  ")
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(mb)), ModTime: x.now, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// player builds the export's player.html from its events.jsonl.
func (x *Export) player(build func([]byte) ([]byte, error), exts map[string]string) ([]byte, error) {
	evs := []json.RawMessage{}
	for _, line := range bytes.Split(bytes.TrimSpace(x.events.Bytes()), []byte("\n")) {
		if len(line) > 0 {
			evs = append(evs, line)
		}
	}
	data, err := json.Marshal(map[string]any{"sandbox_id": x.id, "events": evs, "ext": exts})
	if err != nil {
		return nil, err
	}
	return build(data)
}
