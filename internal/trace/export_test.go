package trace_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/trace"
)

// untar reads a tar.gz into its files, in order.
func untar(t *testing.T, b []byte) (names []string, files map[string][]byte) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files = map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		files[h.Name] = body
	}
}

// TestExport exports a trace whose events name a kept artifact (twice) and
// a gone one, and checks the archive: its files in order, the manifest's
// sizes and sums, the missing artifact, the clock's time and the player's
// data.
func TestExport(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	s := open(t, t.TempDir(), func() time.Time { return at })
	ctx := context.Background()
	for _, d := range []string{`{"artifact":{"id":"art_1"}}`, `{"thumbnail":{"id":"art_1"},"artifact":{"id":"art_gone"}}`, `{"i":3}`} {
		if _, err := s.Append(ctx, "t1", "sb1", trace.Event{Actor: trace.ActorSystem, Kind: trace.KindComputerScreenshot, Data: json.RawMessage(d)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Export("t2", "sb1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's export: %v, want not found", err)
	}
	x, err := s.Export("t1", "sb1")
	if err != nil {
		t.Fatal(err)
	}
	var opened []string
	var playerData []byte
	cfg := trace.ExportConfig{
		OpenArtifact: func(ctx context.Context, tenant, id string) (string, int64, io.ReadCloser, error) {
			opened = append(opened, tenant+"/"+id)
			if id != "art_1" {
				return "", 0, nil, errdefs.ErrNotFound
			}
			return ".png", 5, io.NopCloser(strings.NewReader("PNG!!")), nil
		},
		Player: func(data []byte) ([]byte, error) { playerData = data; return []byte("<html>"), nil },
	}
	var out bytes.Buffer
	if err := x.WriteTo(ctx, &out, cfg); err != nil {
		t.Fatal(err)
	}
	names, files := untar(t, out.Bytes())
	if want := "events.jsonl artifacts/art_1.png player.html manifest.json"; strings.Join(names, " ") != want {
		t.Fatalf("archive %q, want %q", names, want)
	}
	if strings.Join(opened, " ") != "t1/art_1 t1/art_gone" {
		t.Fatalf("opened %q: want each named artifact once, as the trace's tenant", opened)
	}
	dec := json.NewDecoder(bytes.NewReader(files["manifest.json"]))
	dec.DisallowUnknownFields()
	var man api.TraceManifest
	if err := dec.Decode(&man); err != nil {
		t.Fatal(err)
	}
	if man.SandboxID != "sb1" || !man.ExportedAt.Equal(at) || man.Events != 3 || len(man.Missing) != 1 || man.Missing[0] != "art_gone" {
		t.Fatalf("manifest %+v", man)
	}
	if len(man.Files) != 3 || man.Files[1].ArtifactID != "art_1" {
		t.Fatalf("manifest files %+v", man.Files)
	}
	for _, f := range man.Files {
		sum := sha256.Sum256(files[f.Path])
		if f.Size != int64(len(files[f.Path])) || f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("manifest file %+v does not match the archive's", f)
		}
	}
	var pd struct {
		SandboxID string            `json:"sandbox_id"`
		Events    []trace.Event     `json:"events"`
		Ext       map[string]string `json:"ext"`
	}
	if err := json.Unmarshal(playerData, &pd); err != nil || pd.SandboxID != "sb1" || len(pd.Events) != 3 || pd.Ext["art_1"] != ".png" {
		t.Fatalf("player data %s (%v)", playerData, err)
	}
	// Without a player (a binary built without the front-end), the rest.
	cfg.Player = func([]byte) ([]byte, error) { return nil, errors.New("no front-end") }
	out.Reset()
	if err := x.WriteTo(ctx, &out, cfg); err != nil {
		t.Fatal(err)
	}
	if names, _ := untar(t, out.Bytes()); strings.Join(names, " ") != "events.jsonl artifacts/art_1.png manifest.json" {
		t.Fatalf("archive without a player %q", names)
	}
}
