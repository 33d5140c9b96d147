package httpapi_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestTraceExportManifest exports a trace of caller events and reads the
// archive's manifest.json, its last file, strictly as the API's
// TraceManifest: every field the service writes is one the type declares,
// the events count is events.jsonl's lines and every listed file's size and
// sha256 are the archive's.
func TestTraceExportManifest(t *testing.T) {
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	base := "/v1/sandboxes/" + sb.ID + "/trace"
	const n = 3
	for i := 1; i <= n; i++ {
		resp, body := a.do(req{method: "POST", path: base + "/events", key: keyA, body: fmt.Sprintf(`{"kind":"annotation","data":{"i":%d}}`, i)})
		if resp.StatusCode != 201 {
			t.Fatalf("post %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := a.do(req{method: "GET", path: base + "/export", key: keyA})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("export: %d %s %.200q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	gz, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
		names = append(names, h.Name)
	}
	if len(names) == 0 || names[len(names)-1] != "manifest.json" {
		t.Fatalf("archive files %v, want manifest.json last", names)
	}
	dec := json.NewDecoder(bytes.NewReader(files["manifest.json"]))
	dec.DisallowUnknownFields()
	var man client.TraceManifest
	if err := dec.Decode(&man); err != nil {
		t.Fatalf("manifest %s: %v", files["manifest.json"], err)
	}
	if man.SandboxID != sb.ID || man.ExportedAt.IsZero() || man.Events != n || len(man.Missing) != 0 {
		t.Fatalf("manifest %+v, want sandbox %s, %d events", man, sb.ID, n)
	}
	if lines := strings.Count(string(files["events.jsonl"]), "\n"); lines != n {
		t.Fatalf("events.jsonl has %d lines, want %d", lines, n)
	}
	// Every file but the manifest is listed, with its size and sha256.
	if len(man.Files) != len(names)-1 || man.Files[0].Path != "events.jsonl" {
		t.Fatalf("manifest files %+v, archive %v", man.Files, names)
	}
	for _, f := range man.Files {
		sum := sha256.Sum256(files[f.Path])
		if int64(len(files[f.Path])) != f.Size || hex.EncodeToString(sum[:]) != f.SHA256 || f.ArtifactID != "" {
			t.Errorf("manifest file %+v is not the archive's (%d bytes)", f, len(files[f.Path]))
		}
	}
}
