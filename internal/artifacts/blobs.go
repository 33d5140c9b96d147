package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// Blobs is a content-addressed store: each distinct content is one file,
// named by its SHA-256, below dir. It is safe for concurrent use; two Puts
// of the same content leave one blob.
type Blobs struct {
	dir string
}

// SniffBytes is how much of a blob's head Put returns for MIME sniffing.
const SniffBytes = 512

// OpenBlobs makes (if needed) and opens the blob store in dir.
func OpenBlobs(dir string) (*Blobs, error) {
	if dir == "" {
		return nil, errdefs.Invalid("artifacts: empty blob directory")
	}
	for _, d := range []string{dir, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("artifacts: blob directory: %v: %w", err, errdefs.ErrUnavailable)
		}
	}
	return &Blobs{dir: dir}, nil
}

// ValidSHA256 reports whether s is a lowercase hex SHA-256.
func ValidSHA256(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func (b *Blobs) path(sum string) string { return filepath.Join(b.dir, sum[:2], sum) }

// PutResult describes a stored blob.
type PutResult struct {
	SHA256 string
	Size   int64
	// Head is the first SniffBytes bytes (or fewer), for MIME sniffing.
	Head []byte
	// Existed is true when the content was already stored (deduplicated).
	Existed bool
}

// Put stores the content of r. More than maxBytes bytes (maxBytes > 0)
// fail with errdefs.ErrTooLarge and store nothing. The blob is written to a
// temporary file, synced and renamed into place; content already present
// is not written again (its modification time is refreshed).
func (b *Blobs) Put(r io.Reader, maxBytes int64) (PutResult, error) {
	tmp, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "put-*")
	if err != nil {
		return PutResult{}, fmt.Errorf("artifacts: temp blob: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer func() {
		tmp.Close()
		_ = os.Remove(tmp.Name()) // gone after a successful rename
	}()
	h := sha256.New()
	head := &headWriter{}
	src := r
	if maxBytes > 0 {
		src = io.LimitReader(r, maxBytes+1)
	}
	n, err := io.CopyBuffer(io.MultiWriter(tmp, h, head), src, make([]byte, 256<<10))
	if err != nil {
		return PutResult{}, fmt.Errorf("artifacts: writing blob: %w", err)
	}
	if maxBytes > 0 && n > maxBytes {
		return PutResult{}, fmt.Errorf("artifacts: content is over %d bytes: %w", maxBytes, errdefs.ErrTooLarge)
	}
	res := PutResult{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n, Head: head.b}
	dst := b.path(res.SHA256)
	if st, err := os.Stat(dst); err == nil && st.Size() == n {
		now := time.Now()
		_ = os.Chtimes(dst, now, now)
		res.Existed = true
		return res, nil
	}
	if err := tmp.Sync(); err != nil {
		return PutResult{}, fmt.Errorf("artifacts: syncing blob: %v: %w", err, errdefs.ErrUnavailable)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return PutResult{}, fmt.Errorf("artifacts: blob directory: %v: %w", err, errdefs.ErrUnavailable)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return PutResult{}, fmt.Errorf("artifacts: storing blob: %v: %w", err, errdefs.ErrUnavailable)
	}
	return res, nil
}

type headWriter struct{ b []byte }

func (w *headWriter) Write(p []byte) (int, error) {
	if room := SniffBytes - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Open opens the blob sum for reading. A missing blob is errdefs.ErrNotFound.
func (b *Blobs) Open(sum string) (*os.File, error) {
	if !ValidSHA256(sum) {
		return nil, fmt.Errorf("artifacts: blob %q: %w", sum, errdefs.ErrNotFound)
	}
	f, err := os.Open(b.path(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("artifacts: blob %s is missing: %w", sum, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("artifacts: blob %s: %v: %w", sum, err, errdefs.ErrUnavailable)
	}
	return f, nil
}

// Has reports whether the blob sum is stored.
func (b *Blobs) Has(sum string) bool {
	if !ValidSHA256(sum) {
		return false
	}
	_, err := os.Stat(b.path(sum))
	return err == nil
}

// Remove deletes the blob sum; a missing blob is not an error.
func (b *Blobs) Remove(sum string) error {
	if !ValidSHA256(sum) {
		return fmt.Errorf("artifacts: blob %q: %w", sum, errdefs.ErrInvalidArgument)
	}
	if err := os.Remove(b.path(sum)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("artifacts: removing blob %s: %v: %w", sum, err, errdefs.ErrUnavailable)
	}
	return nil
}

// List returns the SHA-256 of every stored blob, and removes temporary
// files older than staleTmp (left by a crash during a Put).
func (b *Blobs) List(staleTmp time.Duration) ([]string, error) {
	var out []string
	shards, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, fmt.Errorf("artifacts: listing blobs: %v: %w", err, errdefs.ErrUnavailable)
	}
	for _, sh := range shards {
		if !sh.IsDir() {
			continue
		}
		if sh.Name() == "tmp" {
			b.removeStaleTmp(staleTmp)
			continue
		}
		names, err := os.ReadDir(filepath.Join(b.dir, sh.Name()))
		if err != nil {
			continue
		}
		for _, n := range names {
			if ValidSHA256(n.Name()) && strings.HasPrefix(n.Name(), sh.Name()) {
				out = append(out, n.Name())
			}
		}
	}
	return out, nil
}

func (b *Blobs) removeStaleTmp(age time.Duration) {
	dir := filepath.Join(b.dir, "tmp")
	names, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if info, err := n.Info(); err == nil && time.Since(info.ModTime()) > age {
			_ = os.Remove(filepath.Join(dir, n.Name()))
		}
	}
}
