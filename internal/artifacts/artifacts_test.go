package artifacts

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern     string
		base        string
		depth       int
		match, miss []string
	}{
		{"out/*.png", "out", 1, []string{"out/a.png"}, []string{"out/a.jpg", "out/sub/a.png", "a.png"}},
		{"report/**", "report", -1, []string{"report/x", "report/a/b/c.txt"}, []string{"report", "other/x"}},
		{"**/*.png", "", -1, []string{"a.png", "x/y/z.png"}, []string{"a.jpg"}},
		{"/workspace/data/*.csv", "data", 1, []string{"data/x.csv"}, []string{"x.csv"}},
		{"a/**/b/*.txt", "a", -1, []string{"a/b/x.txt", "a/1/2/b/y.txt"}, []string{"a/x.txt"}},
		{"result.json", "", 1, []string{"result.json"}, []string{"x/result.json"}},
		{"./d/[ab].txt", "d", 1, []string{"d/a.txt"}, []string{"d/c.txt"}},
	}
	for _, tc := range tests {
		g, err := ParseGlob("/workspace", tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if g.Base() != tc.base || g.Depth() != tc.depth {
			t.Errorf("%q: base %q depth %d, want %q %d", tc.pattern, g.Base(), g.Depth(), tc.base, tc.depth)
		}
		for _, m := range tc.match {
			if !g.Match(m) {
				t.Errorf("%q should match %q", tc.pattern, m)
			}
		}
		for _, m := range tc.miss {
			if g.Match(m) {
				t.Errorf("%q should not match %q", tc.pattern, m)
			}
		}
	}
	for _, bad := range []string{"", "../x", "a/../../b", "/etc/*", "/workspacex/a", "a/b**", "[", ".", "a\x00b", "a\nb"} {
		if _, err := ParseGlob("/workspace", bad); !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != "invalid_artifact_glob" {
			t.Errorf("%q: want invalid_artifact_glob, got %v", bad, err)
		}
	}
}

func FuzzParseGlob(f *testing.F) {
	for _, s := range []string{"out/*.png", "../x", "**/a", "/workspace/a/**", "a/[b"} {
		f.Add(s, "out/a.png")
	}
	f.Fuzz(func(t *testing.T, pattern, rel string) {
		g, err := ParseGlob("/workspace", pattern)
		if err != nil {
			return
		}
		for _, c := range g.parts {
			if c == ".." || c == "" {
				t.Fatalf("%q kept component %q", pattern, c)
			}
		}
		_ = g.Match(rel)
		if strings.Contains(g.Base(), "..") {
			t.Fatalf("%q: base %q climbs", pattern, g.Base())
		}
	})
}

func TestDetectMIME(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n0000")
	for _, tc := range []struct {
		name string
		head []byte
		want string
	}{
		{"a.png", nil, "image/png"},
		{"a.CSV", nil, "text/csv; charset=utf-8"},
		{"noext", png, "image/png"},
		{"noext", []byte("hello\n"), "text/plain; charset=utf-8"},
		{"noext", []byte{0, 1, 2, 3}, "application/octet-stream"},
	} {
		if got := DetectMIME(tc.name, tc.head); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBlobs(t *testing.T) {
	t.Parallel()
	b, err := OpenBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("artifact "), 1000)
	var wg sync.WaitGroup
	results := make([]PutResult, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = b.Put(bytes.NewReader(content), 0) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || results[i].SHA256 != results[0].SHA256 || results[i].Size != int64(len(content)) {
			t.Fatalf("put %d: %+v %v", i, results[i], err)
		}
	}
	if len(results[0].Head) != SniffBytes {
		t.Fatalf("head is %d bytes", len(results[0].Head))
	}
	list, err := b.List(time.Hour)
	if err != nil || len(list) != 1 || list[0] != results[0].SHA256 {
		t.Fatalf("one blob expected for one content: %v %v", list, err)
	}
	again, err := b.Put(bytes.NewReader(content), 0)
	if err != nil || !again.Existed {
		t.Fatalf("second put should deduplicate: %+v %v", again, err)
	}
	f, err := b.Open(again.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	f.Close()
	if !bytes.Equal(got, content) {
		t.Fatal("content differs")
	}
	if _, err := b.Put(bytes.NewReader(content), 100); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("over the cap: %v", err)
	}
	if list, _ := b.List(time.Hour); len(list) != 1 {
		t.Fatalf("a refused put left a blob: %v", list)
	}
	if tmp, _ := os.ReadDir(b.dir + "/tmp"); len(tmp) != 0 {
		t.Fatalf("temp files left: %v", tmp)
	}
	if err := b.Remove(again.SHA256); err != nil || b.Has(again.SHA256) {
		t.Fatalf("remove: %v", err)
	}
	if err := b.Remove(again.SHA256); err != nil {
		t.Fatalf("removing a missing blob: %v", err)
	}
	if _, err := b.Open(again.SHA256); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("open removed: %v", err)
	}
	if _, err := b.Open("../../etc/passwd"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("open bad name: %v", err)
	}
}
