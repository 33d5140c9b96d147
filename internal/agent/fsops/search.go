package fsops

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Search by name and content, and batch replace: the "edit without
// download-modify-upload" path. Trees are walked through directory
// descriptors (symlinks are never followed); files are read and rewritten
// through the confined resolver, rewritten with temp file + rename.

// matcher finds a literal or an RE2 regular expression in a line.
type matcher struct {
	lit []byte
	re  *regexp.Regexp
}

func newMatcher(pattern string, regex, icase bool) (*matcher, error) {
	if len(pattern) > agentproto.MaxPatternBytes {
		return nil, errdefs.Invalid("pattern is %d bytes, over %d", len(pattern), agentproto.MaxPatternBytes)
	}
	if !regex && !icase {
		return &matcher{lit: []byte(pattern)}, nil
	}
	expr := pattern
	if !regex {
		expr = regexp.QuoteMeta(pattern)
	}
	if icase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, errdefs.WithCode("invalid_pattern", fmt.Errorf("pattern %q: %v: %w", pattern, err, errdefs.ErrInvalidArgument))
	}
	return &matcher{re: re}, nil
}

func (m *matcher) match(line []byte) bool {
	if m.re != nil {
		return m.re.Match(line)
	}
	return bytes.Contains(line, m.lit)
}

// replaceAll replaces every match in b and returns the result and count.
// A regular expression's replacement may use $1 and ${name}.
func (m *matcher) replaceAll(b []byte, repl string) ([]byte, int) {
	if m.re == nil {
		n := bytes.Count(b, m.lit)
		if n == 0 || len(m.lit) == 0 {
			return b, 0
		}
		return bytes.ReplaceAll(b, m.lit, []byte(repl)), n
	}
	n := 0
	out := m.re.ReplaceAllFunc(b, func(match []byte) []byte {
		n++
		return m.re.Expand(nil, []byte(repl), match, m.re.FindSubmatchIndex(match))
	})
	return out, n
}

// globMatch matches a name pattern against a file's base name, or against
// its path below the search root when the pattern has a slash.
func globMatch(glob, rel, name string) bool {
	if glob == "" {
		return true
	}
	target := name
	if strings.Contains(glob, "/") {
		target = rel
	}
	ok, _ := path.Match(glob, target)
	return ok
}

// walkFiles calls fn for every regular file below the directory rel (down
// to maxDepth levels), sorted by name; relFile is the file's real path below
// the root of t, below its path below rel. fn returning errStopWalk ends
// the walk without error.
func walkFiles(t *Tree, rel, display string, maxDepth int, fn func(dir int, name, relFile, below string) error) error {
	l, err := t.resolve(rel, true, true, false)
	if err != nil {
		return fileErr("search", display, err)
	}
	defer l.close()
	var walk func(dir int, relDir, belowDir string, level int) error
	walk = func(dir int, relDir, belowDir string, level int) error {
		rd, err := openat(dir, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil // unreadable: skipped
		}
		f := os.NewFile(uintptr(rd), relDir)
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return nil
		}
		slices.Sort(names)
		for _, name := range names {
			fd, err := openat(dir, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			var st syscall.Stat_t
			err = syscall.Fstat(fd, &st)
			child, below := path.Join(relDir, name), path.Join(belowDir, name)
			switch {
			case err != nil:
			case st.Mode&syscall.S_IFMT == syscall.S_IFREG:
				err = fn(dir, name, child, below)
			case st.Mode&syscall.S_IFMT == syscall.S_IFDIR && level < maxDepth:
				err = walk(fd, child, below, level+1)
			}
			syscall.Close(fd)
			if err != nil {
				return err
			}
		}
		return nil
	}
	err = walk(l.dir, l.canon, "", 1)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

var errStopWalk = errors.New("stop the walk")

// isBinary reports whether the start of a file looks binary (a NUL byte).
func isBinary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

// searchFiles runs a search request below the directory rel.
func searchFiles(t *Tree, rel, display string, req agentproto.SearchRequest, now func() time.Time) (agentproto.SearchResult, error) {
	res := agentproto.SearchResult{Matches: []agentproto.SearchMatch{}}
	if req.Glob == "" && req.Content == "" {
		return res, errdefs.Invalid("search: glob or content is required")
	}
	if _, err := path.Match(req.Glob, ""); err != nil {
		return res, errdefs.WithCode("invalid_pattern", fmt.Errorf("glob %q: %v: %w", req.Glob, err, errdefs.ErrInvalidArgument))
	}
	var m *matcher
	if req.Content != "" {
		var err error
		if m, err = newMatcher(req.Content, req.Regex, req.IgnoreCase); err != nil {
			return res, err
		}
	}
	maxResults := clampInt(req.MaxResults, agentproto.DefaultSearchResults, agentproto.MaxSearchResults)
	maxDepth := clampInt(req.MaxDepth, agentproto.MaxListDepth, agentproto.MaxListDepth)
	deadline := now().Add(time.Duration(clampInt(int(req.TimeoutMS), agentproto.DefaultSearchTimeoutMS, agentproto.MaxSearchTimeoutMS)) * time.Millisecond)
	sc := make([]byte, 64<<10)
	err := walkFiles(t, rel, display, maxDepth, func(dir int, name, relFile, below string) error {
		if now().After(deadline) {
			res.TimedOut = true
			return errStopWalk
		}
		if !globMatch(req.Glob, below, name) {
			return nil
		}
		p := agentproto.JoinRoot(t.root, relFile)
		if m == nil {
			res.Matches = append(res.Matches, agentproto.SearchMatch{Path: p})
			if len(res.Matches) >= maxResults {
				res.Truncated = true
				return errStopWalk
			}
			return nil
		}
		f, fi, err := openRegularAt(dir, name)
		if err != nil {
			res.FilesSkipped++
			return nil
		}
		defer f.Close()
		if fi.Size() > agentproto.MaxEditBytes {
			res.FilesSkipped++
			return nil
		}
		br := bufio.NewReaderSize(f, 64<<10)
		if head, _ := br.Peek(8 << 10); isBinary(head) {
			res.FilesSkipped++
			return nil
		}
		res.FilesScanned++
		s := bufio.NewScanner(br)
		s.Buffer(sc, len(sc))
		s.Split(scanLinesLong)
		for line := 1; s.Scan(); line++ {
			if m.match(s.Bytes()) {
				text := s.Bytes()
				if len(text) > agentproto.MaxMatchText {
					text = text[:agentproto.MaxMatchText]
				}
				res.Matches = append(res.Matches, agentproto.SearchMatch{Path: p, Line: line, Text: strings.ToValidUTF8(string(text), "\uFFFD")})
				if len(res.Matches) >= maxResults {
					res.Truncated = true
					return errStopWalk
				}
			}
			if line%4096 == 0 && now().After(deadline) {
				res.TimedOut = true
				return errStopWalk
			}
		}
		return nil
	})
	return res, err
}

// scanLinesLong is bufio.ScanLines that cuts a line longer than the buffer
// instead of failing: the cut part is searched as a line of its own.
func scanLinesLong(data []byte, atEOF bool) (int, []byte, error) {
	adv, tok, err := bufio.ScanLines(data, atEOF)
	if adv == 0 && tok == nil && err == nil && len(data) >= 64<<10 {
		return len(data), data, nil
	}
	return adv, tok, err
}

func clampInt(v, def, max int) int {
	if v <= 0 {
		return def
	}
	return min(v, max)
}

// replaceFiles applies a batch replace to the files named or found.
func replaceFiles(t *Tree, req agentproto.ReplaceRequest, resolve func(string) (string, string, error)) (agentproto.ReplaceResult, error) {
	res := agentproto.ReplaceResult{DryRun: req.DryRun, Files: []agentproto.ReplaceFile{}}
	if req.Find == "" {
		return res, errdefs.Invalid("replace: find is required")
	}
	m, err := newMatcher(req.Find, req.Regex, req.IgnoreCase)
	if err != nil {
		return res, err
	}
	maxFiles := clampInt(req.MaxFiles, agentproto.DefaultReplaceFiles, agentproto.MaxReplaceFiles)
	var rels, displays []string
	switch {
	case len(req.Paths) > 0 && req.Path != "":
		return res, errdefs.Invalid("replace: paths and path are mutually exclusive")
	case len(req.Paths) > maxFiles:
		return res, errdefs.Invalid("replace: %d paths, at most %d", len(req.Paths), maxFiles)
	case len(req.Paths) > 0:
		for _, p := range req.Paths {
			root, rel, err := resolve(p)
			if err != nil {
				return res, err
			}
			if root != t.root {
				return res, errdefs.WithCode(agentproto.CodeCrossRoot, errdefs.Invalid("replace: %q is in another allowed root", p))
			}
			rels, displays = append(rels, rel), append(displays, p)
		}
	default:
		root, rel, err := resolve(cmpOr(req.Path, "."))
		if err != nil {
			return res, err
		}
		if root != t.root {
			return res, errdefs.WithCode(agentproto.CodeCrossRoot, errdefs.Invalid("replace: %q is in another allowed root", req.Path))
		}
		err = walkFiles(t, rel, req.Path, agentproto.MaxListDepth, func(_ int, name, relFile, below string) error {
			if !globMatch(req.Glob, below, name) {
				return nil
			}
			if len(rels) >= maxFiles {
				res.Truncated = true
				return errStopWalk
			}
			rels, displays = append(rels, relFile), append(displays, agentproto.JoinRoot(t.root, relFile))
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	buf := make([]byte, 1<<20)
	for i, rel := range rels {
		f := agentproto.ReplaceFile{Path: displays[i]}
		n, err := replaceOne(t, rel, displays[i], m, req.Replace, req.DryRun, buf)
		if err != nil {
			f.Error = err.Error()
			f.Code = errdefs.Code(err)
			res.Failed++
		}
		f.Replacements = n
		res.Replacements += n
		if n > 0 && err == nil {
			res.FilesChanged++
		}
		res.Files = append(res.Files, f)
	}
	return res, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// replaceOne rewrites one file (following symlinks inside the root to the
// real file, whose mode is kept).
func replaceOne(t *Tree, rel, display string, m *matcher, repl string, dryRun bool, buf []byte) (int, error) {
	l, err := t.resolve(rel, true, false, false)
	if err != nil {
		return 0, fileErr("replace in", display, err)
	}
	real := path.Join(l.canon, l.name)
	if l.name == "." {
		l.close()
		return 0, fileErr("replace in", display, syscall.EISDIR)
	}
	f, fi, err := openRegularAt(l.dir, l.name)
	l.close()
	if err != nil {
		if err == syscall.EINVAL {
			return 0, errdefs.WithCode(agentproto.CodeNotRegularFile, errdefs.Invalid("replace in %q: not a regular file", display))
		}
		return 0, fileErr("replace in", display, err)
	}
	if fi.Size() > agentproto.MaxEditBytes {
		f.Close()
		return 0, errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf("replace in %q: %d bytes, over %d: %w", display, fi.Size(), agentproto.MaxEditBytes, errdefs.ErrTooLarge))
	}
	content, err := io.ReadAll(io.LimitReader(f, agentproto.MaxEditBytes+1))
	f.Close()
	if err != nil {
		return 0, fileErr("replace in", display, err)
	}
	if isBinary(content[:min(len(content), 8<<10)]) {
		return 0, errdefs.WithCode("binary_file", fmt.Errorf("replace in %q: binary file: %w", display, errdefs.ErrInvalidArgument))
	}
	out, n := m.replaceAll(content, repl)
	if n == 0 || dryRun {
		return n, nil
	}
	_, err = writeInTree(t, writeSpec{root: t.root, rel: real, display: display, mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky),
		overwrite: true, maxBytes: -1}, bytes.NewReader(out), buf)
	return n, err
}
