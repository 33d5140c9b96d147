package changes

import (
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// Status is how a file differs from its base.
type Status string

// The statuses of a changed file.
const (
	Added    Status = "added"
	Modified Status = "modified"
	Deleted  Status = "deleted"
	// ModeChanged is a file whose content is the same and whose mode is
	// not.
	ModeChanged Status = "mode_changed"
	// Renamed is a file a patch moved (a diff lists the two paths as
	// deleted and added).
	Renamed Status = "renamed"
)

// FileChange is one changed file of a diff.
type FileChange struct {
	Path   string `json:"path"`
	Status Status `json:"status"`
	// OldMode and NewMode are octal permission bits ("120000" for a
	// symbolic link), empty on the side where the file is absent.
	OldMode string `json:"old_mode,omitempty"`
	NewMode string `json:"new_mode,omitempty"`
	OldSize int64  `json:"old_size"`
	NewSize int64  `json:"new_size"`
	// Binary files are named, their contents never shown.
	Binary bool `json:"binary,omitempty"`
	// TooLarge files are over the diff's per-file or memory limit: named,
	// compared by checksum, no lines shown.
	TooLarge  bool `json:"too_large,omitempty"`
	Additions int  `json:"additions"`
	Deletions int  `json:"deletions"`
	// Diff is the file's part of the unified diff (git format), empty for
	// binary and too-large files and once the diff's byte limit is
	// reached.
	Diff string `json:"diff,omitempty"`
}

// Summary counts a diff's changed files, all of them, listed or not.
type Summary struct {
	Files       int `json:"files"`
	Added       int `json:"added"`
	Modified    int `json:"modified"`
	Deleted     int `json:"deleted"`
	ModeChanged int `json:"mode_changed"`
	Additions   int `json:"additions"`
	Deletions   int `json:"deletions"`
}

// Result is a diff: the changed files in path order, within the limits.
type Result struct {
	// Base says what the workspace was compared with ("creation",
	// "snap_…", "sbx_…").
	Base    string       `json:"base"`
	Files   []FileChange `json:"files"`
	Summary Summary      `json:"summary"`
	// Truncated says that files were left out of Files (past
	// MaxDiffFiles) or shown without lines (past MaxDiffBytes);
	// TruncatedReason says which.
	Truncated       bool   `json:"truncated"`
	TruncatedReason string `json:"truncated_reason,omitempty"`
}

// Patch is the git-compatible unified diff of the files listed, in path
// order; binary and too-large files are named the way git names a binary
// file it does not show ("Binary files … differ"), so git apply refuses
// such a patch rather than apply part of it. A truncated diff starts with
// a comment saying so, which git apply ignores; so does one that names each
// mode change git cannot express (0644 → 0600), which has no patch text.
func (r *Result) Patch() string {
	var b strings.Builder
	if r.Truncated {
		fmt.Fprintf(&b, "# genesis: this diff is truncated: %s\n", r.TruncatedReason)
	}
	for _, f := range r.Files {
		if f.Status == ModeChanged && f.Diff == "" && !r.Truncated {
			fmt.Fprintf(&b, "# genesis: %s: mode %s → %s, which git cannot express (it keeps only the executable bit): not in this patch\n",
				f.Path, f.OldMode, f.NewMode)
		}
	}
	for _, f := range r.Files {
		if f.Diff != "" {
			b.WriteString(f.Diff)
		}
	}
	return b.String()
}

// gitMode is the mode git records for e: 100755 for an executable file,
// 100644 for another, 120000 for a symbolic link.
func gitMode(e *Entry) fs.FileMode {
	switch {
	case e.Mode&fs.ModeSymlink != 0:
		return 0o120000
	case e.Mode&0o111 != 0:
		return 0o100755
	default:
		return 0o100644
	}
}

// modeString is e's mode as a diff lists it.
func modeString(e *Entry) string {
	if e == nil {
		return ""
	}
	if e.Mode&fs.ModeSymlink != 0 {
		return "120000"
	}
	return fmt.Sprintf("%04o", e.Mode.Perm())
}

// binary reports whether data is binary the way git decides it: a NUL
// byte in its first 8000 bytes.
func binary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// Diff compares cur with base. Files are listed in path order, at most
// MaxDiffFiles of them, with their unified diff while the diff's bytes
// stay under MaxDiffBytes.
func Diff(base, cur Tree, lim Limits) *Result {
	lim = lim.withDefaults()
	paths := make([]string, 0, len(cur))
	for p := range cur {
		paths = append(paths, p)
	}
	for p := range base {
		if _, ok := cur[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	res := &Result{Files: []FileChange{}}
	bytesOut := 0
	for _, p := range paths {
		fc, ok := compare(p, base[p], cur[p], lim)
		if !ok {
			continue
		}
		res.Summary.Files++
		switch fc.Status {
		case Added:
			res.Summary.Added++
		case Modified:
			res.Summary.Modified++
		case Deleted:
			res.Summary.Deleted++
		case ModeChanged:
			res.Summary.ModeChanged++
		}
		res.Summary.Additions += fc.Additions
		res.Summary.Deletions += fc.Deletions
		if len(res.Files) >= lim.MaxDiffFiles {
			res.Truncated = true
			res.TruncatedReason = fmt.Sprintf("more than %d changed files; the summary counts them all", lim.MaxDiffFiles)
			continue
		}
		if bytesOut+len(fc.Diff) > lim.MaxDiffBytes {
			fc.Diff = ""
			if !res.Truncated {
				res.Truncated = true
				res.TruncatedReason = fmt.Sprintf("the diff is over %d bytes; later files are listed without their lines", lim.MaxDiffBytes)
			}
		}
		bytesOut += len(fc.Diff)
		res.Files = append(res.Files, fc)
	}
	return res
}

// compare describes how one path differs; ok is false when it does not.
func compare(p string, old, cur *Entry, lim Limits) (FileChange, bool) {
	fc := FileChange{Path: p, OldMode: modeString(old), NewMode: modeString(cur)}
	f := &gitdiff.File{OldName: p, NewName: p}
	switch {
	case old == nil:
		fc.Status, fc.NewSize = Added, cur.Size
		f.IsNew, f.OldName, f.NewMode = true, "", gitMode(cur)
	case cur == nil:
		fc.Status, fc.OldSize = Deleted, old.Size
		f.IsDelete, f.NewName, f.OldMode = true, "", gitMode(old)
	default:
		fc.OldSize, fc.NewSize = old.Size, cur.Size
		sameData := sameContent(old, cur) && old.Mode&fs.ModeSymlink == cur.Mode&fs.ModeSymlink
		if sameData && old.Mode == cur.Mode {
			return fc, false
		}
		fc.Status = Modified
		if sameData {
			fc.Status = ModeChanged
		}
		if gitMode(old) != gitMode(cur) {
			f.OldMode, f.NewMode = gitMode(old), gitMode(cur)
		}
		if sameData {
			if f.OldMode == 0 {
				return fc, true // a change git cannot express (0644 → 0600): listed, no patch
			}
			fc.Diff = f.String()
			return fc, true
		}
	}
	var oldData, newData []byte
	if old != nil {
		oldData = old.Data
	}
	if cur != nil {
		newData = cur.Data
	}
	switch {
	case tooLarge(old, lim) || tooLarge(cur, lim):
		fc.TooLarge = true
		f.IsBinary = true
	case binary(oldData) || binary(newData):
		fc.Binary = true
		f.IsBinary = true
	default:
		f.TextFragments = fragments(string(oldData), string(newData))
		for _, fr := range f.TextFragments {
			fc.Additions += int(fr.LinesAdded)
			fc.Deletions += int(fr.LinesDeleted)
		}
	}
	fc.Diff = f.String()
	return fc, true
}

// fragments is the line diff of old and new as git's hunks, with three
// lines of context.
func fragments(old, new string) []*gitdiff.TextFragment {
	edits := udiff.Lines(old, new)
	u, err := udiff.ToUnifiedDiff("a", "b", old, edits, udiff.DefaultContextLines)
	if err != nil {
		panic(fmt.Sprintf("changes: inconsistent edits: %v", err)) // udiff's own edits always apply
	}
	var out []*gitdiff.TextFragment
	for _, h := range u.Hunks {
		fr := &gitdiff.TextFragment{OldPosition: int64(h.FromLine), NewPosition: int64(h.ToLine)}
		leading := true
		for _, l := range h.Lines {
			var op gitdiff.LineOp
			switch l.Kind {
			case udiff.Delete:
				op = gitdiff.OpDelete
				fr.OldLines++
				fr.LinesDeleted++
			case udiff.Insert:
				op = gitdiff.OpAdd
				fr.NewLines++
				fr.LinesAdded++
			default:
				op = gitdiff.OpContext
				fr.OldLines++
				fr.NewLines++
				if leading {
					fr.LeadingContext++
				}
				fr.TrailingContext++
			}
			if op != gitdiff.OpContext {
				leading = false
				fr.TrailingContext = 0
			}
			fr.Lines = append(fr.Lines, gitdiff.Line{Op: op, Line: l.Content})
		}
		// A hunk of an empty side starts at line 0, as git writes it.
		if fr.OldLines == 0 {
			fr.OldPosition = 0
		}
		if fr.NewLines == 0 {
			fr.NewPosition = 0
		}
		out = append(out, fr)
	}
	return out
}

// sameContent reports whether a and b hold the same bytes: by git blob id
// when both have one (a git base's large blobs are never inflated, so
// have no checksum), else by checksum.
func sameContent(a, b *Entry) bool {
	if !a.blob.IsZero() && !b.blob.IsZero() {
		return a.blob == b.blob
	}
	return a.Sum == b.Sum
}

// tooLarge reports whether e is a file whose lines a diff does not show.
func tooLarge(e *Entry, lim Limits) bool {
	return e != nil && (!e.Kept || e.Size > lim.MaxTextBytes)
}
