package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// File commands: every path in a sandbox is below /workspace (relative
// paths are taken from there); the service does each operation inside the
// sandbox, through its agent.

// remotePath is SANDBOX:PATH split; ok is false for a local path.
type remotePath struct {
	sandbox, path string
}

// parseRemote splits SANDBOX:PATH. An argument is remote when it has a
// colon and no slash before it (so ./a:b and /tmp/a:b stay local).
func parseRemote(arg string) (remotePath, bool) {
	i := strings.IndexByte(arg, ':')
	if i <= 0 || strings.ContainsRune(arg[:i], '/') {
		return remotePath{}, false
	}
	return remotePath{sandbox: arg[:i], path: arg[i+1:]}, true
}

// sandboxArg reads SANDBOX or SANDBOX:PATH (PATH defaults to def).
func sandboxArg(arg, def string) remotePath {
	if r, ok := parseRemote(arg); ok {
		if r.path == "" {
			r.path = def
		}
		return r
	}
	return remotePath{sandbox: arg, path: def}
}

// newCpCmd builds "genesis cp".
func newCpCmd(a *app) *cobra.Command {
	var mode string
	cmd := &cobra.Command{
		Use:   "cp [flags] SRC DST",
		Short: "Copy files and directories between this host and a sandbox (SANDBOX:PATH)",
		Long: `Copy a file or a directory between this host and a sandbox. Exactly one of
SRC and DST is SANDBOX:PATH (PATH absolute under /workspace or relative to
it); the other is a local path, or - for stdin/stdout (files only).

As with cp -r: when DST is an existing directory the copy goes inside it
under SRC's name, otherwise DST becomes the copy. Directories travel as a
tar stream that the sandbox's agent unpacks (refusing entries that would
escape) or packs; when unpacking on this host, entries that would land
outside DST are refused too.`,
		Args: exactArgs(2, "SRC and DST"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			src, srcRemote := parseRemote(args[0])
			dst, dstRemote := parseRemote(args[1])
			if srcRemote == dstRemote {
				return usageErrorf("exactly one of SRC and DST must be SANDBOX:PATH")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			if dstRemote {
				return a.upload(ctx, c, args[0], dst, mode)
			}
			return a.download(ctx, c, src, args[1])
		}),
	}
	cmd.Flags().StringVar(&mode, "mode", "", "octal permission bits of an uploaded file (default: the local file's)")
	return cmd
}

// remoteTarget is where a copy to dst lands: inside dst when it is an
// existing directory (or ends in a slash), else dst itself.
func remoteTarget(ctx context.Context, c *client.Client, dst remotePath, name string) (string, error) {
	if dst.path == "" || strings.HasSuffix(dst.path, "/") {
		return path.Join(dst.path, name), nil
	}
	info, err := c.StatFile(ctx, dst.sandbox, dst.path)
	switch {
	case err == nil && info.Type == "dir":
		return path.Join(dst.path, name), nil
	case err == nil || client.IsNotFound(err):
		return dst.path, nil
	}
	return "", err
}

func (a *app) upload(ctx context.Context, c *client.Client, local string, dst remotePath, mode string) error {
	if local == "-" {
		if dst.path == "" || strings.HasSuffix(dst.path, "/") {
			return usageErrorf("copying stdin needs a file name in DST")
		}
		w, err := c.WriteFile(ctx, dst.sandbox, dst.path, a.stdin, client.WriteFileOptions{Mode: mode})
		if err != nil {
			return err
		}
		return a.printWritten(w)
	}
	st, err := os.Stat(local)
	if err != nil {
		return err
	}
	target, err := remoteTarget(ctx, c, dst, filepath.Base(filepath.Clean(local)))
	if err != nil {
		return err
	}
	if !st.IsDir() {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		if mode == "" {
			mode = fmt.Sprintf("%04o", st.Mode().Perm())
		}
		w, err := c.WriteFile(ctx, dst.sandbox, target, f, client.WriteFileOptions{Mode: mode, Size: st.Size()})
		if err != nil {
			return err
		}
		return a.printWritten(w)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, local)) }()
	res, err := c.ExtractArchive(ctx, dst.sandbox, target, pr, -1)
	pr.CloseWithError(errors.New("upload ended"))
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return printJSON(a.stdout, res)
	}
	_, err = fmt.Fprintf(a.stdout, "%s: %d files, %d directories, %d bytes\n", res.Path, res.Files, res.Dirs, res.Bytes)
	return err
}

func (a *app) printWritten(w *client.FileWritten) error {
	if a.jsonOutput() {
		return printJSON(a.stdout, w)
	}
	_, err := fmt.Fprintf(a.stdout, "%s: %d bytes, sha256 %s\n", w.Path, w.Size, w.SHA256)
	return err
}

// writeTar writes the tree below dir as a tar stream (entries relative to
// dir; symlinks as links, never followed).
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !info.Mode().IsRegular() && !info.IsDir() && link == "" {
			return nil // devices, FIFOs and sockets are not copied
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func (a *app) download(ctx context.Context, c *client.Client, src remotePath, local string) error {
	if src.path == "" {
		return usageErrorf("SRC needs a path after SANDBOX:")
	}
	info, err := c.StatFile(ctx, src.sandbox, src.path)
	if err != nil {
		return err
	}
	target := local
	if local != "-" {
		if st, err := os.Stat(local); err == nil && st.IsDir() {
			target = filepath.Join(local, info.Name)
		}
	}
	if info.Type == "dir" {
		if local == "-" {
			return usageErrorf("a directory cannot be copied to stdout")
		}
		rc, err := c.ReadArchive(ctx, src.sandbox, src.path)
		if err != nil {
			return err
		}
		defer rc.Close()
		return extractTar(rc, target)
	}
	d, err := c.ReadFile(ctx, src.sandbox, src.path, nil)
	if err != nil {
		return err
	}
	defer d.Body.Close()
	if local == "-" {
		_, err = io.Copy(a.stdout, d.Body)
		return err
	}
	perm := os.FileMode(0o644)
	if m, err := strconv.ParseUint(info.Mode, 8, 32); err == nil {
		perm = os.FileMode(m).Perm()
	}
	return writeFileAtomic(target, perm, func(w io.Writer) error {
		n, err := io.Copy(w, d.Body)
		if err == nil && d.Length >= 0 && n != d.Length {
			err = fmt.Errorf("download cut short at %d of %d bytes", n, d.Length)
		}
		return err
	})
}

// extractTar unpacks a tar stream into dir (made if missing) through an
// os.Root, so no entry lands outside dir; symlinks whose target would
// leave dir are skipped.
func extractTar(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if !filepath.IsLocal(name) {
			return fmt.Errorf("archive entry %q would land outside %s", h.Name, dir)
		}
		perm := os.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, perm|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if !filepath.IsLocal(path.Join(path.Dir(name), h.Linkname)) || path.IsAbs(h.Linkname) {
				continue // would point outside dir
			}
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return err
			}
			if err := root.Symlink(h.Linkname, name); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
	}
}

// newLsCmd builds "genesis ls".
func newLsCmd(a *app) *cobra.Command {
	var depth, limit int
	cmd := &cobra.Command{
		Use:   "ls [flags] SANDBOX[:PATH]",
		Short: "List a directory of a sandbox (default /workspace)",
		Args:  exactArgs(1, "SANDBOX or SANDBOX:PATH"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			r := sandboxArg(args[0], "/workspace")
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.FileList, error) {
				return c.ListFiles(ctx, r.sandbox, r.path, depth, limit)
			}, func(list *client.FileList) error {
				if err := printTable(a.stdout, "MODE\tSIZE\tMODIFIED\tPATH", list.Entries, func(tw io.Writer, e client.FileInfo) {
					name := e.Path
					switch e.Type {
					case "dir":
						name += "/"
					case "symlink":
						name += " -> " + e.LinkTarget
					}
					fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\n", typeLetter(e.Type), e.Mode, e.Size, formatTime(e.ModTime), name)
				}); err != nil {
					return err
				}
				if list.Truncated {
					a.warnf("listing truncated; raise --limit or list a deeper directory")
				}
				return nil
			})
		}),
	}
	cmd.Flags().IntVarP(&depth, "depth", "d", 1, "levels to descend (1: the directory's entries)")
	cmd.Flags().IntVar(&limit, "limit", 0, "most entries listed (0: service default)")
	return cmd
}

// newCatCmd builds "genesis cat".
func newCatCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cat SANDBOX:PATH...",
		Short: "Write files of a sandbox to stdout",
		Args:  minArgs(1, "SANDBOX:PATH"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			for _, arg := range args {
				r, ok := parseRemote(arg)
				if !ok || r.path == "" {
					return usageErrorf("%q is not SANDBOX:PATH", arg)
				}
				d, err := c.ReadFile(ctx, r.sandbox, r.path, nil)
				if err != nil {
					return err
				}
				_, err = io.Copy(a.stdout, d.Body)
				d.Body.Close()
				if err != nil {
					return err
				}
			}
			return nil
		}),
	}
}

// newFindCmd builds "genesis find".
func newFindCmd(a *app) *cobra.Command {
	var req client.SearchRequest
	cmd := &cobra.Command{
		Use:   "find [flags] SANDBOX[:PATH] (--name GLOB | --content TEXT)",
		Short: "Find files of a sandbox by name and/or content",
		Long: `Find files below PATH (default /workspace) by name (--name, a glob on the
base name, or on the path below PATH when it has a slash) and/or by content
(--content, literal, or RE2 with --regex). Name matches print the path;
content matches print PATH:LINE:TEXT. Symlinks are not followed.`,
		Args: exactArgs(1, "SANDBOX or SANDBOX:PATH"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if req.Glob == "" && req.Content == "" {
				return usageErrorf("give --name GLOB and/or --content TEXT")
			}
			r := sandboxArg(args[0], "/workspace")
			req.Path = r.path
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			res, err := c.SearchFiles(ctx, r.sandbox, req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, res)
			}
			for _, m := range res.Matches {
				if m.Line > 0 {
					fmt.Fprintf(a.stdout, "%s:%d:%s\n", m.Path, m.Line, m.Text)
				} else {
					fmt.Fprintln(a.stdout, m.Path)
				}
			}
			if res.Truncated {
				a.warnf("results truncated at %d; narrow the search or raise --max-results", len(res.Matches))
			}
			if res.TimedOut {
				a.warnf("the search timed out; results are partial")
			}
			if len(res.Matches) == 0 {
				return &exitError{code: 1} // like grep: nothing found
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&req.Glob, "name", "", "glob on file names")
	fs.StringVar(&req.Content, "content", "", "text (or with --regex, an RE2 expression) to find in lines")
	fs.BoolVar(&req.Regex, "regex", false, "--content is a regular expression")
	fs.BoolVarP(&req.IgnoreCase, "ignore-case", "i", false, "match content ignoring case")
	fs.IntVar(&req.MaxDepth, "max-depth", 0, "levels to descend (0: service default)")
	fs.IntVar(&req.MaxResults, "max-results", 0, "most matches (0: service default)")
	return cmd
}

// newReplaceCmd builds "genesis replace".
func newReplaceCmd(a *app) *cobra.Command {
	var (
		req   client.ReplaceRequest
		files []string
	)
	cmd := &cobra.Command{
		Use:   "replace [flags] SANDBOX[:PATH] FIND REPLACEMENT",
		Short: "Replace text in many files of a sandbox in one call",
		Long: `Replace FIND by REPLACEMENT in the files given with --file, or in every file
below PATH (default /workspace) matching --glob. FIND is literal, or an RE2
expression with --regex (REPLACEMENT may then use $1). --dry-run only counts.
Prints the replacements per file; exits 1 when a file failed.`,
		Args: exactArgs(3, "SANDBOX[:PATH], FIND and REPLACEMENT"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			r := sandboxArg(args[0], "")
			req.Find, req.Replace = args[1], args[2]
			switch {
			case len(files) > 0 && r.path != "":
				return usageErrorf("give either SANDBOX:PATH or --file, not both")
			case len(files) > 0:
				req.Paths = files
			default:
				req.Path = orDefault(r.path, "/workspace")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			res, err := c.ReplaceInFiles(ctx, r.sandbox, req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := printJSON(a.stdout, res); err != nil {
					return err
				}
			} else {
				tw := newTable(a.stdout)
				for _, f := range res.Files {
					if f.Error != "" {
						fmt.Fprintf(tw, "%s\terror: %s\n", f.Path, f.Error)
						continue
					}
					fmt.Fprintf(tw, "%s\t%d\n", f.Path, f.Replacements)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				verb := "replaced"
				if res.DryRun {
					verb = "would replace"
				}
				a.warnf("%s %d occurrences in %d files", verb, res.Replacements, res.FilesChanged)
			}
			if res.Failed > 0 {
				return &exitError{code: 1}
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&files, "file", nil, "a file to edit (repeatable; instead of PATH and --glob)")
	fs.StringVar(&req.Glob, "glob", "", "only files whose name matches this glob")
	fs.BoolVar(&req.Regex, "regex", false, "FIND is a regular expression")
	fs.BoolVarP(&req.IgnoreCase, "ignore-case", "i", false, "match ignoring case")
	fs.BoolVar(&req.DryRun, "dry-run", false, "count, change nothing")
	fs.IntVar(&req.MaxFiles, "max-files", 0, "most files edited (0: service default)")
	return cmd
}

func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// typeLetter is the ls -l style letter of a file type.
func typeLetter(t string) string {
	switch t {
	case "file":
		return "-"
	case "dir":
		return "d"
	case "symlink":
		return "l"
	case "fifo":
		return "p"
	case "socket":
		return "s"
	case "device":
		return "c"
	}
	return "?"
}
