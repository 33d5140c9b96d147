package agentproto

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"genesis.dev/sandbox/internal/errdefs"
)

// Paths of the file operations. Every path the agent touches is confined to
// its allowed roots (the service's default: /workspace, /tmp and the sandbox
// user's home) and resolved inside the sandbox by fsops' confined walk, as
// the sandbox user.
const (
	PathFiles       = "/v1/files"        // PUT ?path=&mode=&overwrite=&max_bytes= raw body → FileWriteResult; GET ?path= → raw bytes (Range, If-None-Match honoured)
	PathFilesStat   = "/v1/files/stat"   // GET ?path= → FileInfo (the final symlink is not followed)
	PathFilesList   = "/v1/files/list"   // GET ?path=&depth=&limit= → FileList
	PathFilesMkdir  = "/v1/files/mkdir"  // POST MkdirRequest → FileInfo
	PathFilesMove   = "/v1/files/move"   // POST MoveRequest → FileInfo of the destination
	PathFilesDelete = "/v1/files/delete" // POST DeleteRequest → 204
	PathFilesChmod  = "/v1/files/chmod"  // POST ChmodRequest → FileInfo

	PathFilesExtract = "/v1/files/extract" // POST ?path=&max_bytes=&max_entries= body tar or tar.gz → ExtractResult
	PathFilesArchive = "/v1/files/archive" // GET ?path= → the directory as a tar stream
	PathFilesSearch  = "/v1/files/search"  // POST SearchRequest → SearchResult
	PathFilesReplace = "/v1/files/replace" // POST ReplaceRequest → ReplaceResult
)

// Limits of search and replace.
const (
	MaxPatternBytes        = 4096
	MaxEditBytes           = 16 << 20 // files larger are skipped by a content search and refused by replace
	MaxMatchText           = 512      // bytes of a matching line returned
	DefaultSearchResults   = 1000
	MaxSearchResults       = 10000
	DefaultSearchTimeoutMS = 10000
	MaxSearchTimeoutMS     = 60000
	DefaultReplaceFiles    = 1000
	MaxReplaceFiles        = 10000
)

// SearchRequest finds files below Path (default: the first root) by name
// (Glob, path.Match syntax, against the base name or, with a slash, the
// path below Path) and/or content (Content per line, literal or RE2 with
// Regex). Symlinks are not followed; binary files and files over
// MaxEditBytes are skipped for content.
type SearchRequest struct {
	Path       string `json:"path,omitempty"`
	Glob       string `json:"glob,omitempty"`
	Content    string `json:"content,omitempty"`
	Regex      bool   `json:"regex,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	MaxDepth   int    `json:"max_depth,omitempty"`
	MaxResults int    `json:"max_results,omitempty"`
	TimeoutMS  int64  `json:"timeout_ms,omitempty"`
}

// SearchMatch is a file found by name (Line 0) or a matching line.
type SearchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line,omitempty"` // 1-based
	Text string `json:"text,omitempty"` // the line, at most MaxMatchText bytes
}

// SearchResult is the answer of a search.
type SearchResult struct {
	Matches      []SearchMatch `json:"matches"`
	Truncated    bool          `json:"truncated"` // MaxResults reached
	TimedOut     bool          `json:"timed_out"`
	FilesScanned int           `json:"files_scanned"`
	FilesSkipped int           `json:"files_skipped"` // binary, too big or unreadable
}

// ReplaceRequest replaces Find (literal, or RE2 with Regex; the
// replacement may then use $1) in the files Paths, or in every file below
// Path matching Glob. DryRun counts without writing. Files are rewritten
// with temp file + rename, keeping their mode.
type ReplaceRequest struct {
	Paths      []string `json:"paths,omitempty"`
	Path       string   `json:"path,omitempty"`
	Glob       string   `json:"glob,omitempty"`
	Find       string   `json:"find"`
	Replace    string   `json:"replace"`
	Regex      bool     `json:"regex,omitempty"`
	IgnoreCase bool     `json:"ignore_case,omitempty"`
	DryRun     bool     `json:"dry_run,omitempty"`
	MaxFiles   int      `json:"max_files,omitempty"`
}

// ReplaceFile is the outcome for one file.
type ReplaceFile struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Error        string `json:"error,omitempty"`
	Code         string `json:"code,omitempty"`
}

// ReplaceResult is the answer of a batch replace.
type ReplaceResult struct {
	Files        []ReplaceFile `json:"files"`
	Replacements int           `json:"replacements"`
	FilesChanged int           `json:"files_changed"`
	Failed       int           `json:"failed"`
	Truncated    bool          `json:"truncated"` // more files matched than MaxFiles
	DryRun       bool          `json:"dry_run"`
}

// Query parameters of the file operations.
const (
	QueryPath      = "path"
	QueryMode      = "mode"
	QueryOverwrite = "overwrite"
	QueryMaxBytes  = "max_bytes"
	// QueryMaxEntries bounds the entries of an extracted archive (default
	// and at most MaxArchiveEntries).
	QueryMaxEntries = "max_entries"
	QueryDepth      = "depth"
	QueryLimit      = "limit"
)

// An upload (PUT PathFiles) is sent as a body of unannounced length: its
// size, when known, travels in HeaderUploadSize (the agent refuses a body
// of another length), and a sender whose source fails ends the body
// cleanly with the trailer TrailerUploadAbort saying why. The agent then
// removes what it wrote before it answers, so once the answer is in,
// nothing of the upload is left.
const (
	HeaderUploadSize   = "Genesis-Upload-Size"
	TrailerUploadAbort = "Genesis-Upload-Abort"
)

// Headers the agent sets on a file read, besides ETag, Last-Modified,
// Content-Length and Content-Range.
const (
	HeaderFileSize = "X-Genesis-File-Size" // size of the whole file in bytes
	HeaderFileMode = "X-Genesis-File-Mode" // permission bits in octal, e.g. 0644
)

// FileRootsEnv names the agent's environment variable listing its allowed
// roots, separated by ':' (absolute, clean paths, or HomeRoot). Unset, the
// only root is DefaultFileRoot.
const FileRootsEnv = "GENESIS_AGENT_FILE_ROOTS"

// DefaultFileRoot is the allowed root when none is configured; relative
// paths are resolved against the first root.
const DefaultFileRoot = "/workspace"

// HomeRoot, in a list of allowed roots, stands for the home directory of
// the user the agent runs as (the sandbox user), which the agent looks up
// in the user database; a user without a usable home has no such root.
const HomeRoot = "~"

// Limits of the path policy and of listings.
const (
	MaxPathBytes     = 4096  // a whole path, as given
	MaxNameBytes     = 255   // one component
	DefaultListDepth = 1     // direct children only
	MaxListDepth     = 32    // deepest listing
	DefaultListLimit = 10000 // entries of one listing
	MaxListLimit     = 100000
)

// File types reported in FileInfo.Type.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
	FileTypeFIFO    = "fifo"
	FileTypeSocket  = "socket"
	FileTypeDevice  = "device"
	FileTypeOther   = "other"
)

// Problem codes of the file operations (errdefs.WithCode).
const (
	CodePathOutsideRoot  = "path_outside_root"   // 400: .., absolute path or symlink leading out of the allowed roots
	CodeInvalidPath      = "invalid_path"        // 400: empty, NUL byte, invalid UTF-8
	CodePathTooLong      = "path_too_long"       // 400
	CodeFileNotFound     = "file_not_found"      // 404
	CodeFileExists       = "file_exists"         // 409
	CodeNotADirectory    = "not_a_directory"     // 409
	CodeIsADirectory     = "is_a_directory"      // 409
	CodeDirNotEmpty      = "directory_not_empty" // 409
	CodeNotRegularFile   = "not_regular_file"    // 400: device, FIFO, socket
	CodeNoSpace          = "no_space"            // 413: the workspace is full (ENOSPC, EDQUOT)
	CodeUploadTooLarge   = "upload_too_large"    // 413
	CodeRootNotAllowed   = "path_is_root"        // 400: deleting or moving an allowed root itself
	CodeCrossRoot        = "cross_root"          // 400: a move between two allowed roots
	CodeInvalidMode      = "invalid_mode"        // 400
	CodeTooManySymlinks  = "too_many_symlinks"   // 400
	CodePermissionDenied = "permission_denied"   // 403
)

// FileInfo describes one file. Mode holds the permission bits (and setuid,
// setgid, sticky) as an octal string.
type FileInfo struct {
	Path    string    `json:"path"` // absolute path inside the sandbox
	Name    string    `json:"name"`
	Type    string    `json:"type"` // file | dir | symlink | fifo | socket | device | other
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"` // e.g. "0644"
	ModTime time.Time `json:"mtime"`
	UID     int       `json:"uid"`
	GID     int       `json:"gid"`
	// LinkTarget is what a symlink points at (never followed out of the root).
	LinkTarget string `json:"link_target,omitempty"`
	// NameInvalidUTF8 marks a name that is not valid UTF-8; Name and Path
	// then hold U+FFFD in place of the invalid bytes and cannot be used to
	// address the file.
	NameInvalidUTF8 bool `json:"name_invalid_utf8,omitempty"`
}

// FileWriteResult is the answer of a write.
type FileWriteResult struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
	Mode   string `json:"mode"`
}

// FileList is the answer of a listing: the entries below Path, depth first,
// sorted by name within a directory; symlinks are listed, never descended.
type FileList struct {
	Path      string     `json:"path"`
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"` // the limit cut the listing short
}

// ExtractResult counts what an extraction made. Entries counts every
// header read, Skipped the devices, FIFOs and unknown types left out.
type ExtractResult struct {
	Path      string `json:"path"`
	Entries   int    `json:"entries"`
	Files     int    `json:"files"`
	Dirs      int    `json:"dirs"`
	Symlinks  int    `json:"symlinks"`
	Hardlinks int    `json:"hardlinks"`
	Skipped   int    `json:"skipped"`
	Bytes     int64  `json:"bytes"` // file content written
}

// MaxArchiveEntries bounds the entries of one extracted archive.
const MaxArchiveEntries = 100000

// MkdirRequest creates a directory (with its parents unless Parents is false;
// an existing directory is then not an error).
type MkdirRequest struct {
	Path    string `json:"path"`
	Mode    string `json:"mode,omitempty"`    // default 0755
	Parents *bool  `json:"parents,omitempty"` // default true
}

// MoveRequest renames From to To within one root. Without Overwrite an
// existing To is a conflict.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// DeleteRequest removes a file, a symlink (never its target) or an empty
// directory; with Recursive a whole tree, without following symlinks.
type DeleteRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// ChmodRequest sets the permission bits of a file or directory.
type ChmodRequest struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
}

func pathError(code, format string, args ...any) error {
	return errdefs.WithCode(code, fmt.Errorf(format+": %w", append(args, errdefs.ErrInvalidArgument)...))
}

// ResolvePath applies the path policy: it maps p, an absolute path inside the
// sandbox or a path relative to the first root, to the allowed root holding
// it and a clean path local to that root (filepath.IsLocal; "." for the root
// itself). It is purely lexical: it refuses NUL bytes, invalid UTF-8, over-long
// paths or components, and any path that names a place outside every root
// (.. included). Symlinks are the business of os.Root, which the agent resolves
// every local path with.
//
// roots must be absolute and clean; the longest matching root wins.
func ResolvePath(roots []string, p string) (root, rel string, err error) {
	switch {
	case p == "":
		return "", "", pathError(CodeInvalidPath, "path is empty")
	case len(p) > MaxPathBytes:
		return "", "", pathError(CodePathTooLong, "path is %d bytes, over %d", len(p), MaxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "", "", pathError(CodeInvalidPath, "path contains a NUL byte")
	case !utf8.ValidString(p):
		return "", "", pathError(CodeInvalidPath, "path %q is not valid UTF-8", p)
	case len(roots) == 0:
		return "", "", pathError(CodePathOutsideRoot, "no allowed roots")
	}
	for c := range strings.SplitSeq(p, "/") {
		if len(c) > MaxNameBytes {
			return "", "", pathError(CodePathTooLong, "a path component is %d bytes, over %d", len(c), MaxNameBytes)
		}
	}
	if !path.IsAbs(p) {
		if !filepath.IsLocal(p) {
			return "", "", pathError(CodePathOutsideRoot, "path %q leads outside %s", p, roots[0])
		}
		return roots[0], path.Clean(p), nil
	}
	clean := path.Clean(p)
	best := -1
	for i, r := range roots {
		if !within(r, clean) {
			continue
		}
		if best < 0 || len(r) > len(roots[best]) {
			best = i
		}
	}
	if best < 0 {
		return "", "", pathError(CodePathOutsideRoot, "path %q is outside the allowed roots (%s)", p, strings.Join(roots, ", "))
	}
	root = roots[best]
	rel = strings.TrimLeft(strings.TrimPrefix(clean, root), "/")
	if rel == "" {
		rel = "."
	}
	if !filepath.IsLocal(rel) { // cannot happen after Clean; kept as the invariant's guard
		return "", "", pathError(CodePathOutsideRoot, "path %q leads outside %s", p, root)
	}
	return root, rel, nil
}

// ResolveBelow applies the path policy to name taken relative to dir (an
// absolute path inside the roots): name must be a relative, slash-separated
// path that stays strictly below dir lexically (no leading /, no .. out of
// it, not dir itself). It returns the canonical absolute path. Multipart
// uploads name their files this way.
func ResolveBelow(roots []string, dir, name string) (string, error) {
	if name == "" {
		return "", pathError(CodeInvalidPath, "the name is empty")
	}
	c := path.Clean(name)
	if path.IsAbs(name) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", pathError(CodePathOutsideRoot, "name %q must be a relative path that stays below %s", name, dir)
	}
	root, rel, err := ResolvePath(roots, dir+"/"+name)
	if err != nil {
		return "", err
	}
	return JoinRoot(root, rel), nil
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root) && p[len(root)] == '/'
}

// JoinRoot is the absolute path of rel (as returned by ResolvePath) in root.
func JoinRoot(root, rel string) string {
	if rel == "." {
		return root
	}
	return path.Join(root, rel)
}

// CheckRoot refuses an allowed root that is not an absolute clean path,
// is /, or is, lies in or holds a place the file API must never reach: the
// kernel's file systems (/proc, whose /proc/self/root leads anywhere, /sys
// and /dev) and own, the agent's own directories (its binary's and its
// socket's).
func CheckRoot(root string, own ...string) error {
	if !path.IsAbs(root) || path.Clean(root) != root || root == "/" || strings.IndexByte(root, 0) >= 0 {
		return errdefs.Invalid("allowed root %q is not an absolute clean path other than /", root)
	}
	for _, p := range append([]string{"/proc", "/sys", "/dev"}, own...) {
		if p == "" || !path.IsAbs(p) {
			continue
		}
		if p = path.Clean(p); within(p, root) || within(root, p) {
			return fmt.Errorf("allowed root %q overlaps %s, which the file API never reaches: %w", root, p, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// ParseRoots parses a FileRootsEnv value: absolute, clean, ':'-separated
// paths, or HomeRoot (left for the agent to resolve). Empty yields the
// default root.
func ParseRoots(v string) ([]string, error) {
	if v == "" {
		return []string{DefaultFileRoot}, nil
	}
	var out []string
	for r := range strings.SplitSeq(v, ":") {
		if r == "" {
			continue
		}
		if r == HomeRoot {
			out = append(out, r)
			continue
		}
		if !path.IsAbs(r) || path.Clean(r) != r || strings.IndexByte(r, 0) >= 0 {
			return nil, errdefs.Invalid("allowed root %q is not an absolute clean path", r)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return []string{DefaultFileRoot}, nil
	}
	return out, nil
}

// ParseMode parses an octal permission string ("644", "0644" or "0o644");
// bits above 07777 are refused. Empty yields def.
func ParseMode(s string, def fs.FileMode) (fs.FileMode, error) {
	if s == "" {
		return def, nil
	}
	v := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 || len(v) > 5 {
		return 0, errdefs.WithCode(CodeInvalidMode, errdefs.Invalid("mode %q is not an octal permission between 0 and 07777", s))
	}
	m := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// FormatMode is the octal string of m's permission bits, setuid, setgid and
// sticky bits, e.g. "0644" or "1777".
func FormatMode(m fs.FileMode) string {
	n := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		n |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	return fmt.Sprintf("%04o", n)
}

// FileType names the type of m as in FileInfo.Type.
func FileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return FileTypeFile
	case m.IsDir():
		return FileTypeDir
	case m&fs.ModeSymlink != 0:
		return FileTypeSymlink
	case m&fs.ModeNamedPipe != 0:
		return FileTypeFIFO
	case m&fs.ModeSocket != 0:
		return FileTypeSocket
	case m&fs.ModeDevice != 0:
		return FileTypeDevice
	default:
		return FileTypeOther
	}
}
