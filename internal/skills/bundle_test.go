package skills

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

const skillMD = "---\nname: pdf-tools\ndescription: Fill PDF forms.\nmetadata:\n  network: api.example.test, files.example.test:8443\n---\n# PDF tools\nRun scripts/fill.py.\n"

// entry is one archive member.
type entry struct {
	name string
	body string
	mode int64
	typ  byte // tar type; 0 is a regular file
	link string
}

func tarOf(t testing.TB, gz bool, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = tar.NewWriter(zw)
	} else {
		w = tar.NewWriter(&buf)
	}
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: mode, Typeflag: typ, Linkname: e.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := w.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func zipOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h.SetMode(0o644)
		if mode&0o111 != 0 {
			h.SetMode(0o755)
		}
		f, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var goodFiles = []entry{
	{name: "SKILL.md", body: skillMD},
	{name: "scripts/fill.py", body: "print('filled')\n"},
	{name: "scripts/run", body: "#!/bin/sh\necho run\n", mode: 0o755},
}

// dotted is files named as "tar -C dir ." names them.
func dotted(files []entry) []entry {
	out := make([]entry, len(files))
	for i, e := range files {
		e.name = "./" + e.name
		out[i] = e
	}
	return out
}

func TestParseFormatsShareOneDigest(t *testing.T) {
	t.Parallel()
	prefixed := make([]entry, 0, len(goodFiles)+1)
	prefixed = append(prefixed, entry{name: "pdf-tools/", typ: tar.TypeDir, mode: 0o755})
	for _, e := range goodFiles {
		e.name = "pdf-tools/" + e.name
		prefixed = append(prefixed, e)
	}
	archives := map[string][]byte{
		"tar":               tarOf(t, false, goodFiles...),
		"tar.gz":            tarOf(t, true, goodFiles...),
		"zip":               zipOf(t, goodFiles...),
		"tar in a folder":   tarOf(t, true, prefixed...),
		"tar -C dir .":      tarOf(t, true, append([]entry{{name: "./", typ: tar.TypeDir, mode: 0o755}, {name: "./scripts/", typ: tar.TypeDir, mode: 0o755}}, dotted(goodFiles)...)...),
		"./ names, reorder": tarOf(t, false, entry{name: "./scripts/run", body: "#!/bin/sh\necho run\n", mode: 0o700}, entry{name: "./SKILL.md", body: skillMD}, entry{name: "./scripts/fill.py", body: "print('filled')\n", mode: 0o600}),
	}
	var digest string
	for name, a := range archives {
		b, err := Parse(bytes.NewReader(a), DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(b.Files) != 3 || b.Files[0].Path != "SKILL.md" || b.Files[2].Path != "scripts/run" || !b.Files[2].Executable || b.Files[1].Executable {
			t.Errorf("%s: files %+v", name, b.Files)
		}
		if b.Manifest.Name != "pdf-tools" || len(b.Manifest.Network) != 2 || b.Manifest.Network[1] != "files.example.test:8443" {
			t.Errorf("%s: manifest %+v", name, b.Manifest)
		}
		if digest == "" {
			digest = b.Digest
		} else if b.Digest != digest {
			t.Errorf("%s: digest %s, want %s (the same folder)", name, b.Digest, digest)
		}
		// The canonical archive parses back to the same digest.
		c, err := b.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		if b2, err := Parse(bytes.NewReader(c), DefaultLimits); err != nil || b2.Digest != digest {
			t.Errorf("%s: canonical archive: %v, digest %v", name, err, b2)
		}
	}
	// Any change of content, name or execute bit changes the digest.
	for name, files := range map[string][]entry{
		"content": {goodFiles[0], {name: "scripts/fill.py", body: "print('other')\n"}, goodFiles[2]},
		"name":    {goodFiles[0], {name: "scripts/fill2.py", body: "print('filled')\n"}, goodFiles[2]},
		"mode":    {goodFiles[0], goodFiles[1], {name: "scripts/run", body: "#!/bin/sh\necho run\n"}},
	} {
		b, err := Parse(bytes.NewReader(tarOf(t, false, files...)), DefaultLimits)
		if err != nil || b.Digest == digest {
			t.Errorf("changed %s: digest %v (%v), want another than %s", name, b, err, digest)
		}
	}
}

func TestParseRefusesBadArchives(t *testing.T) {
	t.Parallel()
	md := entry{name: "SKILL.md", body: skillMD}
	small := Limits{MaxArchiveBytes: 1 << 20, MaxTotalBytes: 1000, MaxFiles: 3}
	for _, tc := range []struct {
		name    string
		archive []byte
		lim     Limits
		code    string
	}{
		{"dot-dot", tarOf(t, false, md, entry{name: "../evil.py", body: "x"}), DefaultLimits, "skill_path_escapes"},
		{"dot-dot inside", tarOf(t, false, md, entry{name: "scripts/../../evil", body: "x"}), DefaultLimits, "skill_path_escapes"},
		{"absolute", tarOf(t, false, md, entry{name: "/etc/cron.d/x", body: "x"}), DefaultLimits, "skill_path_escapes"},
		{"zip dot-dot", zipOf(t, md, entry{name: "../../x", body: "x"}), DefaultLimits, "skill_path_escapes"},
		{"symlink out", tarOf(t, false, md, entry{name: "data", typ: tar.TypeSymlink, link: "/etc/shadow"}), DefaultLimits, "skill_link_refused"},
		{"symlink in", tarOf(t, false, md, entry{name: "data", typ: tar.TypeSymlink, link: "SKILL.md"}), DefaultLimits, "skill_link_refused"},
		{"hard link", tarOf(t, false, md, entry{name: "data", typ: tar.TypeLink, link: "SKILL.md"}), DefaultLimits, "skill_link_refused"},
		{"device", tarOf(t, false, md, entry{name: "null", typ: tar.TypeChar}), DefaultLimits, "skill_special_file"},
		{"fifo", tarOf(t, false, md, entry{name: "pipe", typ: tar.TypeFifo}), DefaultLimits, "skill_special_file"},
		{"no SKILL.md", tarOf(t, false, entry{name: "README.md", body: "hi"}), DefaultLimits, "skill_manifest_missing"},
		{"SKILL.md in a subfolder of two", tarOf(t, false, entry{name: "a/SKILL.md", body: skillMD}, entry{name: "b/x", body: "x"}), DefaultLimits, "skill_manifest_missing"},
		{"empty", tarOf(t, false), DefaultLimits, "skill_manifest_missing"},
		{"no front matter", tarOf(t, false, entry{name: "SKILL.md", body: "# just text\n"}), DefaultLimits, "skill_manifest_invalid"},
		{"unclosed front matter", tarOf(t, false, entry{name: "SKILL.md", body: "---\nname: x\n"}), DefaultLimits, "skill_manifest_invalid"},
		{"bad yaml", tarOf(t, false, entry{name: "SKILL.md", body: "---\nname: [x\n---\n"}), DefaultLimits, "skill_manifest_invalid"},
		{"no name", tarOf(t, false, entry{name: "SKILL.md", body: "---\ndescription: d\n---\n"}), DefaultLimits, "skill_manifest_invalid"},
		{"bad name", tarOf(t, false, entry{name: "SKILL.md", body: "---\nname: Bad_Name\ndescription: d\n---\n"}), DefaultLimits, "skill_manifest_invalid"},
		{"no description", tarOf(t, false, entry{name: "SKILL.md", body: "---\nname: x\n---\n"}), DefaultLimits, "skill_manifest_invalid"},
		{"bad network", tarOf(t, false, entry{name: "SKILL.md", body: "---\nname: x\ndescription: d\nmetadata:\n  network: http://x/y\n---\n"}), DefaultLimits, "skill_manifest_invalid"},
		{"duplicate", tarOf(t, false, md, entry{name: "a", body: "1"}, entry{name: "./a", body: "2"}), DefaultLimits, "invalid_skill_archive"},
		{"file and folder", tarOf(t, false, md, entry{name: "a", body: "1"}, entry{name: "a/b", body: "2"}), DefaultLimits, "invalid_skill_archive"},
		{"backslash", tarOf(t, false, md, entry{name: `..\x`, body: "1"}), DefaultLimits, "invalid_skill_archive"},
		{"not an archive", []byte("hello, this is not a tar file at all, but it is long enough to look at ......................................................................................................................................................................................................................................................................................................................................................................................................................................................................"), DefaultLimits, "invalid_skill_archive"},
		{"too many files", tarOf(t, false, md, entry{name: "a", body: "1"}, entry{name: "b", body: "1"}, entry{name: "c", body: "1"}), small, "skill_too_large"},
		{"too many bytes", tarOf(t, false, md, entry{name: "a", body: strings.Repeat("x", 1000)}), small, "skill_too_large"},
		{"archive too large", tarOf(t, false, md), Limits{MaxArchiveBytes: 100, MaxTotalBytes: 1000, MaxFiles: 3}, "skill_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := Parse(bytes.NewReader(tc.archive), tc.lim)
			if err == nil {
				t.Fatalf("parsed: %+v", b)
			}
			if got := errdefs.Code(err); got != tc.code {
				t.Errorf("code %q (%v), want %s", got, err, tc.code)
			}
		})
	}
}

func TestManifestFields(t *testing.T) {
	t.Parallel()
	m, err := ParseManifest([]byte("\xef\xbb\xbf---\r\nname: csv-report\r\ndescription: >\r\n  Summarise a CSV.\r\nlicense: MIT\r\nallowed-tools: Bash Read\r\nmetadata:\r\n  version: 2\r\n---\r\nbody\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "csv-report" || m.Description != "Summarise a CSV." || m.License != "MIT" || len(m.AllowedTools) != 2 ||
		m.Metadata["version"] != "2" || len(m.Network) != 0 {
		t.Errorf("manifest %+v", m)
	}
	for _, n := range []string{"a", "a-b", "a1-b2-c3", strings.Repeat("a", 64)} {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
	}
	for _, n := range []string{"", "-a", "a-", "a--b", "A", "a_b", "a.b", strings.Repeat("a", 65)} {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
}

func TestAnalyze(t *testing.T) {
	t.Parallel()
	b, err := Parse(bytes.NewReader(tarOf(t, false,
		entry{name: "SKILL.md", body: skillMD + "See https://api.example.test/v1 and https://docs.other.test/page.\n"},
		entry{name: "scripts/fill.py", body: "import os\nAPI_KEY = \"abcdefgh12345678\"\nurl = 'http://files.example.test:8443/x'\n"},
		entry{name: "scripts/tool", body: "#!/usr/bin/env node\nconsole.log(1)\n", mode: 0o755},
		entry{name: "keys/id", body: "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n"},
		entry{name: "bin/blob", body: "\x00\x01 https://hidden.test/"},
		entry{name: "run.sh", body: "echo ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"},
	)), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	r := Analyze(b)
	if got := strings.Join(r.Scripts["python"], ","); got != "scripts/fill.py" {
		t.Errorf("python scripts %q", got)
	}
	if got := strings.Join(r.Scripts["node"], ","); got != "scripts/tool" {
		t.Errorf("node scripts %q", got)
	}
	if got := strings.Join(r.Scripts["shell"], ","); got != "run.sh" {
		t.Errorf("shell scripts %q", got)
	}
	if got := strings.Join(r.Hosts, ","); got != "api.example.test,docs.other.test,files.example.test" {
		t.Errorf("hosts %q (a binary file is not read)", got)
	}
	if got := strings.Join(r.Undeclared, ","); got != "docs.other.test" {
		t.Errorf("undeclared hosts %q", got)
	}
	kinds := map[string]string{}
	for _, s := range r.Secrets {
		kinds[s.Path] = s.Kind
	}
	if kinds["scripts/fill.py"] != "assignment" || kinds["keys/id"] != "private_key" || kinds["run.sh"] != "github_token" || len(r.Secrets) != 3 {
		t.Errorf("secrets %+v", r.Secrets)
	}
	for _, s := range r.Secrets {
		if s.Line == 0 {
			t.Errorf("secret finding without a line: %+v", s)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(tarOf(f, false, goodFiles...))
	f.Add(tarOf(f, true, goodFiles...))
	f.Add(zipOf(f, goodFiles...))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(bytes.NewReader(data), Limits{MaxArchiveBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxFiles: 100})
		if err != nil {
			if errdefs.Code(err) == "" && !strings.Contains(err.Error(), "invalid argument") && !strings.Contains(err.Error(), "too large") {
				t.Fatalf("an error without class or code: %v", err)
			}
			return
		}
		for _, f := range b.Files {
			if strings.HasPrefix(f.Path, "/") || strings.Contains("/"+f.Path+"/", "/../") || f.Path == "" {
				t.Fatalf("a path outside the skill was accepted: %q", f.Path)
			}
		}
		if b.Digest != Digest(b.Files) {
			t.Fatal("digest differs from the files'")
		}
	})
}
