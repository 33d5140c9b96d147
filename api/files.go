package api

import "time"

// FileInfo describes one file of a sandbox.
type FileInfo struct {
	Path            string    `json:"path"`
	Name            string    `json:"name"`
	Type            string    `json:"type"` // file | dir | symlink | fifo | socket | device | other
	Size            int64     `json:"size"`
	Mode            string    `json:"mode"` // octal, e.g. "0644"
	ModTime         time.Time `json:"mtime"`
	UID             int       `json:"uid"`
	GID             int       `json:"gid"`
	LinkTarget      string    `json:"link_target,omitempty"`
	NameInvalidUTF8 bool      `json:"name_invalid_utf8,omitempty"`
}

// FileList is a directory listing.
type FileList struct {
	Path      string     `json:"path"`
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// FileWritten is the answer of an upload.
type FileWritten struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Mode   string `json:"mode"`
}

// MkdirRequest creates a directory; Parents (default true) creates its
// missing parents too.
type MkdirRequest struct {
	Path    string `json:"path"`
	Mode    string `json:"mode,omitempty"`
	Parents *bool  `json:"parents,omitempty"`
}

// MoveRequest renames a file or directory.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// DeleteFileRequest deletes a file, symlink or (with Recursive) a tree.
type DeleteFileRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// ChmodRequest sets a file's permission bits (octal).
type ChmodRequest struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
}

// ExtractResult counts what an archive extraction wrote.
type ExtractResult struct {
	Path      string `json:"path"`
	Entries   int    `json:"entries"`
	Files     int    `json:"files"`
	Dirs      int    `json:"dirs"`
	Symlinks  int    `json:"symlinks"`
	Hardlinks int    `json:"hardlinks"`
	Skipped   int    `json:"skipped"`
	Bytes     int64  `json:"bytes"`
}

// SearchRequest finds files below Path by name (Glob) and/or content.
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

// SearchMatch is a file found by name (Line 0) or one matching line.
type SearchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line,omitempty"`
	Text string `json:"text,omitempty"`
}

// SearchResult is the answer of a search.
type SearchResult struct {
	Matches      []SearchMatch `json:"matches"`
	Truncated    bool          `json:"truncated"`
	TimedOut     bool          `json:"timed_out"`
	FilesScanned int           `json:"files_scanned"`
	FilesSkipped int           `json:"files_skipped"`
}

// ReplaceRequest replaces Find in the files Paths, or in the files below
// Path matching Glob; DryRun only counts.
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

// ReplaceFile is the outcome of a replace for one file.
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
	Truncated    bool          `json:"truncated"`
	DryRun       bool          `json:"dry_run"`
}
