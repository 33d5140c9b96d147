package snapshots

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// A snapshot on disk is one directory, {Dir}/{snapshot id}:
//
//	manifest.json    what is here, every file with its size and SHA-256
//	workspace.tar    the workspace (WriteTree)
//	rootfs.tar       runsc: the root filesystem's changes (runsc tar rootfs-upper)
//	memory/          runsc: the saved processes and memory (runsc checkpoint)
//
// A runc snapshot's root filesystem is an image of the daemon's, named in
// the manifest. It is written under {Dir}/.{id}.tmp and renamed into place
// with its manifest last, so a snapshot directory is complete or absent;
// a crash leaves a .tmp directory that Recover removes.

// ManifestVersion is the version of manifest.json this code writes.
const ManifestVersion = 1

// Manifest describes a snapshot's files.
type Manifest struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Files are every file of the snapshot directory but the manifest,
	// by path relative to it.
	Files []ManifestFile `json:"files"`
	// Workspace, RootfsTar are file names; Memory the directory of the
	// runsc image; RootfsImage a runc snapshot's root filesystem image.
	Workspace   string `json:"workspace,omitempty"`
	RootfsTar   string `json:"rootfs_tar,omitempty"`
	Memory      string `json:"memory,omitempty"`
	RootfsImage string `json:"rootfs_image,omitempty"`
}

// ManifestFile is one file of a snapshot.
type ManifestFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Disk keeps snapshots' files under Dir.
type Disk struct {
	Dir string
}

// Path is the directory of a complete snapshot.
func (d Disk) Path(id string) string { return filepath.Join(d.Dir, id) }

// Draft is a snapshot being written.
type Draft struct {
	disk Disk
	id   string
	dir  string
	man  Manifest
}

// Begin starts writing snapshot id in a fresh temporary directory.
func (d Disk) Begin(id string) (*Draft, error) {
	if !sandbox.ValidID("snap", id) {
		return nil, errdefs.Invalid("snapshots: bad id %q", id)
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
	}
	dir := filepath.Join(d.Dir, "."+id+".tmp")
	os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
	}
	return &Draft{disk: d, id: id, dir: dir, man: Manifest{Version: ManifestVersion, ID: id}}, nil
}

// Dir is where the draft's files go.
func (dr *Draft) Dir() string { return dr.dir }

// Manifest is the draft's manifest, to fill in.
func (dr *Draft) Manifest() *Manifest { return &dr.man }

// Discard removes the draft.
func (dr *Draft) Discard() { os.RemoveAll(dr.dir) }

// Commit sums every file of the draft (sizes and SHA-256s of those not
// summed yet), writes the manifest and moves the draft into place. It
// returns the snapshot's size on disk.
func (dr *Draft) Commit() (int64, error) {
	known := map[string]bool{}
	for _, f := range dr.man.Files {
		known[f.Name] = true
	}
	err := filepath.WalkDir(dr.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dr.dir, p)
		if known[rel] {
			return nil
		}
		size, sum, err := sumFile(p)
		if err != nil {
			return err
		}
		dr.man.Files = append(dr.man.Files, ManifestFile{Name: rel, Size: size, SHA256: sum})
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("snapshots: sum %s: %v: %w", dr.id, err, errdefs.ErrUnavailable)
	}
	var total int64
	for _, f := range dr.man.Files {
		total += f.Size
	}
	b, _ := json.MarshalIndent(dr.man, "", "  ")
	if err := writeSynced(filepath.Join(dr.dir, "manifest.json"), b); err != nil {
		return 0, err
	}
	final := dr.disk.Path(dr.id)
	if err := os.Rename(dr.dir, final); err != nil {
		return 0, fmt.Errorf("snapshots: keep %s: %v: %w", dr.id, err, errdefs.ErrUnavailable)
	}
	syncDir(dr.disk.Dir)
	return total + int64(len(b)), nil
}

// AddSummed records a file the caller summed while writing it.
func (dr *Draft) AddSummed(name string, size int64, sha string) {
	dr.man.Files = append(dr.man.Files, ManifestFile{Name: name, Size: size, SHA256: sha})
}

// Open reads a complete snapshot's manifest.
func (d Disk) Open(id string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(d.Path(id), "manifest.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.WithCode("snapshot_missing", errdefs.Mark(fmt.Errorf("the files of snapshot %s are gone", id), errdefs.ErrFailedPrecondition))
	}
	if err != nil {
		return nil, fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Version != ManifestVersion || m.ID != id {
		return nil, errCorrupt("manifest.json", "unreadable")
	}
	return &m, nil
}

// Verify checks the files of a snapshot against its manifest, skipping
// those named in except (checked as they are read).
func (d Disk) Verify(m *Manifest, except ...string) error {
	skip := map[string]bool{}
	for _, e := range except {
		skip[e] = true
	}
	for _, f := range m.Files {
		if skip[f.Name] {
			continue
		}
		size, sum, err := sumFile(filepath.Join(d.Path(m.ID), f.Name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return errCorrupt(f.Name, "missing")
		case err != nil:
			return fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
		case size != f.Size:
			return errCorrupt(f.Name, fmt.Sprintf("%d bytes, want %d", size, f.Size))
		case sum != f.SHA256:
			return errCorrupt(f.Name, "checksum mismatch")
		}
	}
	return nil
}

// VerifySizes checks that a snapshot's files are all there with their
// sizes, and the small ones (under a MiB) against their checksums: for
// the service's own snapshots, read back moments after they were written,
// where a full check would only slow a wake down.
func (d Disk) VerifySizes(m *Manifest, except ...string) error {
	skip := map[string]bool{}
	for _, e := range except {
		skip[e] = true
	}
	for _, f := range m.Files {
		if skip[f.Name] {
			continue
		}
		p := filepath.Join(d.Path(m.ID), f.Name)
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return errCorrupt(f.Name, "missing")
		case err != nil:
			return fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
		case fi.Size() != f.Size:
			return errCorrupt(f.Name, fmt.Sprintf("%d bytes, want %d", fi.Size(), f.Size))
		case f.Size < 1<<20:
			if _, sum, err := sumFile(p); err != nil || sum != f.SHA256 {
				return errCorrupt(f.Name, "checksum mismatch")
			}
		}
	}
	return nil
}

// File returns the manifest entry of a file.
func (m *Manifest) File(name string) (ManifestFile, bool) {
	for _, f := range m.Files {
		if f.Name == name {
			return f, true
		}
	}
	return ManifestFile{}, false
}

// Remove deletes a snapshot's files (complete or draft).
func (d Disk) Remove(id string) error {
	if !sandbox.ValidID("snap", id) {
		return errdefs.Invalid("snapshots: bad id %q", id)
	}
	os.RemoveAll(filepath.Join(d.Dir, "."+id+".tmp"))
	if err := os.RemoveAll(d.Path(id)); err != nil {
		return fmt.Errorf("snapshots: remove %s: %v: %w", id, err, errdefs.ErrUnavailable)
	}
	return nil
}

// Drafts lists the ids of drafts left by a process that stopped while
// writing them.
func (d Disk) Drafts() []string {
	entries, _ := os.ReadDir(d.Dir)
	var out []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), "."), ".tmp"); ok && strings.HasPrefix(e.Name(), ".") {
			out = append(out, id)
		}
	}
	return out
}

// Complete lists the ids of the complete snapshots on disk.
func (d Disk) Complete() []string {
	entries, _ := os.ReadDir(d.Dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() && sandbox.ValidID("snap", e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func sumFile(p string) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// writeSynced writes a file and flushes it to disk.
func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("snapshots: write %s: %v: %w", p, err, errdefs.ErrUnavailable)
	}
	return nil
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// fullBelow is the free space under which the snapshots' disk counts as
// full.
const fullBelow = 4 << 20

// Full reports whether the disk holding the snapshots has (almost) no
// space left: asked after a write failed, before its draft is removed.
func (d Disk) Full() bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.Dir, &st); err != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) < fullBelow
}
