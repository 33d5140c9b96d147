package changes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"genesis.dev/sandbox/internal/errdefs"
)

// FilePatch is one file of a parsed patch: the paths it reads and writes
// (relative to the workspace, checked local) and its changes.
type FilePatch struct {
	// From is the file the change starts from ("" for a new file), To
	// the file it makes ("" for a deletion); they differ for a rename.
	From, To string
	f        *gitdiff.File
}

// Patch is a parsed patch.
type Patch struct {
	Files []FilePatch
}

func invalidPatch(format string, args ...any) error {
	return errdefs.WithCode(CodePatchInvalid, errdefs.Mark(fmt.Errorf(format+"; nothing was changed", args...), errdefs.ErrInvalidArgument))
}

// stripName takes off the a/ or b/ prefix git puts on a traditional
// diff's names (gitdiff takes it off a git diff's).
func stripName(name string, git bool) string {
	if git || name == "" {
		return name
	}
	for _, p := range []string{"a/", "b/"} {
		if len(name) > len(p) && name[:len(p)] == p {
			return name[len(p):]
		}
	}
	return name
}

// ParsePatch parses a unified or git diff (paths relative to the
// workspace, with or without a/ and b/ prefixes) and checks it against
// what this service applies: text changes, creates, deletes, renames and
// mode changes of regular files, at most MaxPatchFiles of them, each path
// named once, local (no absolute path, no .., nothing under .git).
// Binary patches, symbolic links, submodules and copies are refused.
func ParsePatch(text []byte, lim Limits) (*Patch, error) {
	lim = lim.withDefaults()
	if int64(len(text)) > lim.MaxPatchBytes {
		return nil, errdefs.WithCode(CodePatchTooLarge, errdefs.Mark(fmt.Errorf(
			"the patch is %d bytes, over the %d-byte limit; nothing was changed", len(text), lim.MaxPatchBytes), errdefs.ErrTooLarge))
	}
	files, _, err := gitdiff.Parse(bytes.NewReader(text))
	if err != nil {
		return nil, invalidPatch("the patch is malformed: %v", err)
	}
	if len(files) == 0 {
		return nil, invalidPatch("the text holds no file change (a unified diff starts a file with ---/+++ or diff --git lines)")
	}
	if len(files) > lim.MaxPatchFiles {
		return nil, errdefs.WithCode(CodePatchTooLarge, errdefs.Mark(fmt.Errorf(
			"the patch changes %d files, over the limit of %d; nothing was changed", len(files), lim.MaxPatchFiles), errdefs.ErrTooLarge))
	}
	p := &Patch{}
	seen := map[string]bool{}
	git := bytes.Contains(text, []byte("diff --git "))
	for _, f := range files {
		fp := FilePatch{From: stripName(f.OldName, git), To: stripName(f.NewName, git), f: f}
		if f.IsNew {
			fp.From = ""
		}
		if f.IsDelete {
			fp.To = ""
		}
		name := fp.To
		if name == "" {
			name = fp.From
		}
		switch {
		case f.IsBinary:
			return nil, invalidPatch("%s: binary patches are not applied; upload the file instead", name)
		case f.IsCopy:
			return nil, invalidPatch("%s: copies are not applied; name the new file as a creation", name)
		case isLinkOrModule(f.OldMode) || isLinkOrModule(f.NewMode):
			return nil, invalidPatch("%s: symbolic links and submodules are not applied by a patch", name)
		}
		for i, n := range []string{fp.From, fp.To} {
			if n == "" || (i == 1 && n == fp.From) {
				continue
			}
			if !localName(n) {
				return nil, errdefs.WithCode("path_outside_root", errdefs.Mark(fmt.Errorf(
					"the patch names %q, which is not a relative path inside the workspace (no leading /, no .., nothing under .git); nothing was changed",
					n), errdefs.ErrInvalidArgument))
			}
			if seen[n] {
				return nil, invalidPatch("the patch changes %s twice", n)
			}
			seen[n] = true
		}
		if fp.From == "" && fp.To == "" {
			return nil, invalidPatch("a file change names no file")
		}
		p.Files = append(p.Files, fp)
	}
	return p, nil
}

func isLinkOrModule(m fs.FileMode) bool {
	return m&0o170000 == 0o120000 || m&0o170000 == 0o160000
}

// Current is a file as it is before a patch: Exists false for a missing
// one.
type Current struct {
	Exists bool
	Data   []byte
	Mode   fs.FileMode // permission bits
}

// Op is one step of an applied patch: write Data with Mode at Path, or
// delete Path.
type Op struct {
	Path   string
	Delete bool
	Data   []byte
	Mode   fs.FileMode
}

// Reads lists the files whose current state Apply needs.
func (p *Patch) Reads() []string {
	var out []string
	for _, f := range p.Files {
		if f.From != "" {
			out = append(out, f.From)
		}
		if f.To != "" && f.To != f.From {
			out = append(out, f.To)
		}
	}
	return out
}

// Apply applies p to the files of cur (every path of p.Reads) in memory,
// all or nothing: the first hunk that does not apply, a file to create
// that exists or a file to change that is missing is a patch_conflict
// naming the file and the hunk, and no Op is returned. The Ops write every
// file made or changed and delete every file removed or renamed away.
func Apply(p *Patch, cur map[string]Current) ([]Op, error) {
	var ops []Op
	for _, fp := range p.Files {
		f := fp.f
		if fp.From == "" {
			if c := cur[fp.To]; c.Exists {
				return nil, conflict("%s: the patch creates it, and it exists", fp.To)
			}
		} else if c := cur[fp.From]; !c.Exists {
			return nil, conflict("%s: the patch changes it, and it does not exist", fp.From)
		}
		if fp.From != "" && fp.To != "" && fp.To != fp.From {
			if c := cur[fp.To]; c.Exists {
				return nil, conflict("%s: the patch renames %s to it, and it exists", fp.To, fp.From)
			}
		}
		src := cur[fp.From]
		var out bytes.Buffer
		if err := gitdiff.Apply(&out, bytes.NewReader(src.Data), f); err != nil {
			name := fp.From
			if name == "" {
				name = fp.To
			}
			var ae *gitdiff.ApplyError
			if errors.As(err, &ae) && ae.Fragment > 0 {
				return nil, conflict("%s: hunk %d (%s) does not apply at line %d: %v", name, ae.Fragment,
					hunkHeader(f, ae.Fragment), ae.Line, ae.Unwrap())
			}
			return nil, conflict("%s: %v", name, err)
		}
		if fp.To == "" {
			ops = append(ops, Op{Path: fp.From, Delete: true})
			continue
		}
		mode := src.Mode
		switch {
		case f.NewMode != 0:
			mode = f.NewMode.Perm()
		case fp.From == "":
			mode = 0o644
		}
		ops = append(ops, Op{Path: fp.To, Data: out.Bytes(), Mode: mode})
		if fp.From != "" && fp.From != fp.To {
			ops = append(ops, Op{Path: fp.From, Delete: true})
		}
	}
	return ops, nil
}

// hunkHeader is the @@ line of f's hunk n (one-based) in the order the
// applier took them (by old position).
func hunkHeader(f *gitdiff.File, n int) string {
	frags := append([]*gitdiff.TextFragment(nil), f.TextFragments...)
	for i := 1; i < len(frags); i++ {
		for j := i; j > 0 && frags[j].OldPosition < frags[j-1].OldPosition; j-- {
			frags[j], frags[j-1] = frags[j-1], frags[j]
		}
	}
	if n < 1 || n > len(frags) {
		return "?"
	}
	fr := frags[n-1]
	return fmt.Sprintf("@@ -%d,%d +%d,%d @@", fr.OldPosition, fr.OldLines, fr.NewPosition, fr.NewLines)
}

func conflict(format string, args ...any) error {
	return errdefs.WithCode(CodePatchConflict, errdefs.Mark(fmt.Errorf(format+"; nothing was changed", args...), errdefs.ErrConflict))
}
