package fsops

import (
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// This file is the package's surface: the agent's file routes call these,
// the rest stays inside.

// OpenTree opens the allowed root directory root; every operation on the
// returned Tree stays below it. Close releases it.
func OpenTree(root string) (*Tree, error) { return openTreeFor(root) }

// Close releases the tree's root descriptor.
func (t *Tree) Close() { t.close() }

// CheckDir fails unless rel is an existing directory of the tree.
func (t *Tree) CheckDir(rel string) error {
	l, err := t.resolve(rel, true, true, false)
	if err != nil {
		return err
	}
	l.close()
	return nil
}

// Chmod sets the permission bits of rel and returns its new FileInfo.
func (t *Tree) Chmod(rel string, mode fs.FileMode) (fs.FileInfo, error) { return t.chmod(rel, mode) }

// FileErr turns an error of operation op on the user's path p into its
// class and problem code (escape, not found, exists, ...).
func FileErr(op, p string, err error) error { return fileErr(op, p, err) }

// RootItself is the error of an operation that would change an allowed
// root itself.
func RootItself(op, display string) error { return rootItself(op, display) }

// FileInfo describes rel of root (link: the symlink target, if any).
func FileInfo(root, rel string, fi fs.FileInfo, link string) agentproto.FileInfo {
	return fileInfo(root, rel, fi, link)
}

// StatPath describes rel without following a final symlink.
func StatPath(t *Tree, rel, display string) (agentproto.FileInfo, error) {
	return statPath(t, rel, display)
}

// FileETag is the strong ETag of a regular file's current content.
func FileETag(fi fs.FileInfo) string { return fileETag(fi) }

// WriteSpec says where and how WriteFile writes.
type WriteSpec struct {
	Root, Rel string
	Display   string // the path as the user gave it, for errors
	Mode      fs.FileMode
	Overwrite bool
	MaxBytes  int64 // < 0: no limit
}

// ErrTooLarge is the class error of a body over maxBytes.
func ErrTooLarge(display string, max int64) error { return errTooLarge(display, max) }

// WriteFile writes body to a new file that replaces Rel atomically, using
// buf for the copy. A failure to read body is a *BodyError.
func WriteFile(w WriteSpec, body io.Reader, buf []byte) (agentproto.FileWriteResult, error) {
	return writeFile(writeSpec{root: w.Root, rel: w.Rel, display: w.Display, mode: w.Mode, overwrite: w.Overwrite, maxBytes: w.MaxBytes}, body, buf)
}

// BodyError is a failure to read the body of a write (the caller's fault).
type BodyError = bodyError

// TransferBuffer returns a copy buffer fitting a transfer of size bytes.
func TransferBuffer(size int64) []byte { return transferBuffer(size) }

// BulkWriter is a ResponseWriter that copies a file's content with Buf.
type BulkWriter = bulkWriter

// NewBulkWriter wraps w for a transfer with buffer buf.
func NewBulkWriter(w http.ResponseWriter, buf []byte) *BulkWriter {
	return &bulkWriter{ResponseWriter: w, buf: buf}
}

// OpenRegular opens rel for reading; it must be a regular file.
func OpenRegular(t *Tree, rel, display string) (*os.File, fs.FileInfo, error) {
	return openRegular(t, rel, display)
}

// ListDir lists rel down to depth levels, at most limit entries.
func ListDir(t *Tree, rel, display string, depth, limit int) (agentproto.FileList, error) {
	return listDir(t, rel, display, depth, limit)
}

// MkdirPath makes the directory rel (and its parents when parents).
func MkdirPath(t *Tree, rel, display string, mode fs.FileMode, parents, setMode bool) (agentproto.FileInfo, error) {
	return mkdirPath(t, rel, display, mode, parents, setMode)
}

// MovePath renames from to to within the tree.
func MovePath(t *Tree, from, to, fromDisplay, toDisplay string, overwrite bool) (agentproto.FileInfo, error) {
	return movePath(t, from, to, fromDisplay, toDisplay, overwrite)
}

// DeletePath removes rel (a directory's content too when recursive).
func DeletePath(t *Tree, rel, display string, recursive bool) error {
	return deletePath(t, rel, display, recursive)
}

// ExtractSpec says where and how much ExtractTar extracts.
type ExtractSpec struct {
	Dest, Display string // destination directory, relative to the root
	MaxBytes      int64  // of file content, all entries together
	MaxEntries    int
}

// ExtractTar reads a tar (gzip-compressed or not) from r into the tree.
func ExtractTar(t *Tree, x ExtractSpec, r io.Reader) (agentproto.ExtractResult, error) {
	return extractTar(t, extractSpec{dest: x.Dest, display: x.Display, maxBytes: x.MaxBytes, maxEntries: x.MaxEntries}, r)
}

// WriteTar writes the directory rel as a tar stream to w.
func WriteTar(t *Tree, rel, display string, w io.Writer) error { return writeTar(t, rel, display, w) }

// SearchFiles finds files by name and/or lines by content below rel.
func SearchFiles(t *Tree, rel, display string, req agentproto.SearchRequest, now func() time.Time) (agentproto.SearchResult, error) {
	return searchFiles(t, rel, display, req, now)
}

// ReplaceFiles applies a batch replace; resolve maps a user path to its
// root and relative path.
func ReplaceFiles(t *Tree, req agentproto.ReplaceRequest, resolve func(string) (string, string, error)) (agentproto.ReplaceResult, error) {
	return replaceFiles(t, req, resolve)
}
