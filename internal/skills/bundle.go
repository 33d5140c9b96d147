package skills

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// Limits bound what one skill archive may hold.
type Limits struct {
	// MaxArchiveBytes caps the uploaded archive (compressed).
	MaxArchiveBytes int64
	// MaxTotalBytes caps the sum of the files' sizes (uncompressed).
	MaxTotalBytes int64
	// MaxFiles caps the number of files.
	MaxFiles int
}

// DefaultLimits are the limits when the config gives none.
var DefaultLimits = Limits{MaxArchiveBytes: 8 << 20, MaxTotalBytes: 32 << 20, MaxFiles: 1000}

// File is one regular file of a skill revision. Path is slash-separated,
// relative to the skill's root, clean and local.
type File struct {
	Path string `json:"path"`
	// Executable is true when an execute bit was set in the archive; it is
	// the only mode bit kept.
	Executable bool   `json:"executable,omitempty"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	data       []byte
}

// Bundle is a parsed skill archive: its files, its manifest and its
// content digest.
type Bundle struct {
	Manifest Manifest
	Files    []File // sorted by Path
	// Digest is "sha256:<hex>" of the canonical listing (Digest func).
	Digest string
	Size   int64
}

// file returns the file at p, if any.
func (b *Bundle) file(p string) (*File, bool) {
	i, ok := slices.BinarySearchFunc(b.Files, p, func(f File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return nil, false
	}
	return &b.Files[i], true
}

// invalid is a bad-archive error with its code.
func invalid(code, format string, args ...any) error {
	return errdefs.WithCode(code, errdefs.Invalid(format, args...))
}

// Parse reads a skill archive: a tar (optionally gzip-compressed) or a zip
// of a folder holding SKILL.md at its root, or in a single top-level
// directory (which is then stripped). An entry that escapes the root
// ("..", an absolute path), a link of any kind, a device, a duplicate, a
// file over the limits or a missing or malformed SKILL.md is an error that
// names the entry; nothing is kept of a refused archive.
func Parse(r io.Reader, lim Limits) (*Bundle, error) {
	raw, err := io.ReadAll(io.LimitReader(r, lim.MaxArchiveBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the skill archive: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if int64(len(raw)) > lim.MaxArchiveBytes {
		return nil, errdefs.WithCode("skill_too_large", fmt.Errorf("the skill archive is over %d bytes: %w", lim.MaxArchiveBytes, errdefs.ErrTooLarge))
	}
	var files []File
	switch {
	case bytes.HasPrefix(raw, []byte("PK\x03\x04")) || bytes.HasPrefix(raw, []byte("PK\x05\x06")):
		files, err = readZip(raw, lim)
	case bytes.HasPrefix(raw, []byte{0x1f, 0x8b}):
		zr, gerr := gzip.NewReader(bytes.NewReader(raw))
		if gerr != nil {
			return nil, invalid("invalid_skill_archive", "the gzip stream: %v", gerr)
		}
		files, err = readTar(zr, lim)
	default:
		files, err = readTar(bytes.NewReader(raw), lim)
	}
	if err != nil {
		return nil, err
	}
	files, err = stripTopDir(files)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Files: files}
	paths := make(map[string]bool, len(files))
	for _, f := range files {
		paths[f.Path] = true
		b.Size += f.Size
	}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if paths[d] {
				return nil, invalid("invalid_skill_archive", "%q is a file and also a folder of %q", d, f.Path)
			}
		}
	}
	skillMD, ok := b.file("SKILL.md")
	if !ok {
		return nil, invalid("skill_manifest_missing", "the archive has no SKILL.md at its root (nor in a single top-level folder)")
	}
	if b.Manifest, err = ParseManifest(skillMD.data); err != nil {
		return nil, err
	}
	b.Digest = Digest(files)
	return b, nil
}

// addFile checks one archive entry and appends it.
func addFile(files []File, seen map[string]bool, name string, mode fs.FileMode, r io.Reader, size int64, total *int64, lim Limits) ([]File, error) {
	if strings.Contains(name, "\\") {
		return nil, invalid("invalid_skill_archive", "entry %q has a backslash in its path", name)
	}
	if mode.IsDir() {
		return files, nil // folders are implied by their files' paths ("./" too)
	}
	p := strings.TrimPrefix(name, "./")
	if p == "" || path.IsAbs(p) || !fs.ValidPath(p) || p != path.Clean(p) {
		return nil, invalid("skill_path_escapes", "entry %q is not a clean path inside the skill (no .., no absolute paths)", name)
	}
	switch {
	case mode&fs.ModeSymlink != 0:
		return nil, invalid("skill_link_refused", "entry %q is a symbolic link; a skill holds regular files only", name)
	case !mode.IsRegular():
		return nil, invalid("skill_special_file", "entry %q is not a regular file (%v)", name, mode.Type())
	}
	if seen[p] {
		return nil, invalid("invalid_skill_archive", "entry %q appears twice", name)
	}
	seen[p] = true
	if len(files) >= lim.MaxFiles {
		return nil, errdefs.WithCode("skill_too_large", fmt.Errorf("the skill has more than %d files: %w", lim.MaxFiles, errdefs.ErrTooLarge))
	}
	if size > lim.MaxTotalBytes-*total {
		return nil, errdefs.WithCode("skill_too_large", fmt.Errorf("the skill's files are over %d bytes in all: %w", lim.MaxTotalBytes, errdefs.ErrTooLarge))
	}
	data, err := io.ReadAll(io.LimitReader(r, lim.MaxTotalBytes-*total+1))
	if err != nil {
		return nil, invalid("invalid_skill_archive", "entry %q: %v", name, err)
	}
	if int64(len(data)) > lim.MaxTotalBytes-*total {
		return nil, errdefs.WithCode("skill_too_large", fmt.Errorf("the skill's files are over %d bytes in all: %w", lim.MaxTotalBytes, errdefs.ErrTooLarge))
	}
	*total += int64(len(data))
	sum := sha256.Sum256(data)
	return append(files, File{Path: p, Executable: mode&0o111 != 0, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), data: data}), nil
}

func readTar(r io.Reader, lim Limits) ([]File, error) {
	tr := tar.NewReader(bufio.NewReader(r))
	var files []File
	seen := map[string]bool{}
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, invalid("invalid_skill_archive", "not a tar, tar.gz or zip archive: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeLink:
			return nil, invalid("skill_link_refused", "entry %q is a hard link; a skill holds regular files only", h.Name)
		}
		if files, err = addFile(files, seen, h.Name, h.FileInfo().Mode(), tr, h.Size, &total, lim); err != nil {
			return nil, err
		}
	}
}

func readZip(raw []byte, lim Limits) ([]File, error) {
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return nil, invalid("invalid_skill_archive", "the zip archive: %v", err)
	}
	var files []File
	seen := map[string]bool{}
	var total int64
	for _, zf := range zr.File {
		mode := zf.Mode()
		if strings.HasSuffix(zf.Name, "/") {
			mode |= fs.ModeDir
		}
		var rc io.ReadCloser = io.NopCloser(strings.NewReader(""))
		if mode.IsRegular() {
			if rc, err = zf.Open(); err != nil {
				return nil, invalid("invalid_skill_archive", "entry %q: %v", zf.Name, err)
			}
		}
		files, err = addFile(files, seen, zf.Name, mode, rc, int64(zf.UncompressedSize64), &total, lim)
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// stripTopDir sorts the files and, when SKILL.md is not at the root but
// every file is below one top-level directory holding it, strips that
// directory.
func stripTopDir(files []File) ([]File, error) {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	if len(files) == 0 {
		return nil, invalid("skill_manifest_missing", "the archive holds no files")
	}
	if _, ok := slices.BinarySearchFunc(files, "SKILL.md", func(f File, p string) int { return strings.Compare(f.Path, p) }); ok {
		return files, nil
	}
	top, _, _ := strings.Cut(files[0].Path, "/")
	for _, f := range files {
		if !strings.HasPrefix(f.Path, top+"/") {
			return files, nil // no single folder; Parse reports the missing SKILL.md
		}
	}
	for i := range files {
		files[i].Path = strings.TrimPrefix(files[i].Path, top+"/")
	}
	return files, nil
}

// Digest is the content digest of a skill revision: "sha256:<hex>" of
// one line per file, sorted by path, "<sha256 of content> <x|-> <path>\n"
// (x when executable). It depends on nothing but the paths, contents and
// execute bits, so the same folder packed as tar, tar.gz or zip, by any
// tool, has the same digest.
func Digest(files []File) string {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	for _, f := range sorted {
		x := "-"
		if f.Executable {
			x = "x"
		}
		fmt.Fprintf(h, "%s %s %s\n", f.SHA256, x, f.Path)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// canonicalEpoch is the modification time of every entry of a canonical
// archive.
var canonicalEpoch = time.Unix(0, 0).UTC()

// Canonical is the bundle as a plain tar with fixed metadata (modes 0644
// or 0755, uid and gid 0, a fixed time): what the store keeps.
func (b *Bundle) Canonical() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range b.Files {
		mode := int64(0o644)
		if f.Executable {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: mode, Size: int64(len(f.data)), ModTime: canonicalEpoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
