package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newSkillCmd builds "genesis skill" and its subcommands.
func newSkillCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "skill",
		Aliases: []string{"skills"},
		Short:   "Push skills (folders with SKILL.md and scripts) and run their scripts in sandboxes",
		Long: `A skill is a folder with SKILL.md (YAML front matter: name, description,
optional license, allowed-tools and metadata) and the files its instructions
use. A push keeps it as an immutable revision with a content digest and a
static report (scripts by language, hosts named, secret-like strings).

A run executes one of a revision's own scripts in a sandbox of its own, the
skill read-only at /skill; files the script writes below /workspace/out are
kept as artifacts. The tenant's skills are also an MCP server, at
/v1/mcp/skills under the API key.`,
	}
	cmd.AddCommand(newSkillPushCmd(a), newSkillListCmd(a), newSkillGetCmd(a), newSkillRevisionsCmd(a),
		newSkillCatCmd(a), newSkillRunCmd(a))
	return cmd
}

// skillArchiveType is the Content-Type of a skill archive file, by its
// extension; the service reads the archive by its own bytes whatever it is.
func skillArchiveType(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".zip"):
		return client.SkillArchiveZip
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return client.SkillArchiveGzip
	case strings.HasSuffix(n, ".tar"):
		return client.SkillArchiveTar
	}
	return client.SkillArchiveBytes
}

// packSkillDir packs the regular files below dir as a tar.gz, paths
// relative to dir. A symbolic link or special file is a usage error: a
// skill holds regular files only.
func packSkillDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return usageErrorf("reading %s: %v", dir, err)
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return usageErrorf("%s is a symbolic link; a skill holds regular files only (copy the target in instead)", p)
		case !d.Type().IsRegular():
			return usageErrorf("%s is not a regular file (%v); a skill holds regular files only", p, d.Type())
		}
		info, err := d.Info()
		if err != nil {
			return usageErrorf("reading %s: %v", p, err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return usageErrorf("reading %s: %v", p, err)
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: filepath.ToSlash(rel), Mode: mode, Size: int64(len(data)), ModTime: info.ModTime()}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newSkillPushCmd builds "genesis skill push".
func newSkillPushCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "push DIR|ARCHIVE",
		Short: "Push a skill folder (packed as tar.gz) or archive; prints NAME REVISION DIGEST",
		Long: `Push a skill: a folder holding SKILL.md, packed here as a tar.gz of its regular
files (a symbolic link is refused), or an archive file sent as it is (.zip,
.tar, .tar.gz or .tgz). The skill's name is the one SKILL.md gives.

Prints "NAME REVISION DIGEST", with "(unchanged)" when the skill's latest
revision already had this content (no new revision is made). What the
report found that deserves a look (secret-like strings, hosts the manifest
does not declare) is printed on stderr.`,
		Args: exactArgs(1, "a skill folder or archive"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			src := args[0]
			st, err := os.Stat(src)
			if err != nil {
				return usageErrorf("%v", err)
			}
			var body io.Reader
			contentType := client.SkillArchiveGzip
			if st.IsDir() {
				b, err := packSkillDir(src)
				if err != nil {
					return err
				}
				body = bytes.NewReader(b)
			} else {
				f, err := os.Open(src)
				if err != nil {
					return usageErrorf("%v", err)
				}
				defer f.Close()
				body, contentType = f, skillArchiveType(src)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			rev, created, err := c.PushSkill(ctx, body, contentType)
			if err != nil {
				return err
			}
			a.warnSkillReport(rev)
			if a.jsonOutput() {
				if !created {
					a.warnf("unchanged: revision %d already has this content", rev.Revision)
				}
				return printJSON(a.stdout, rev)
			}
			line := fmt.Sprintf("%s %d %s", rev.Name, rev.Revision, rev.Digest)
			if !created {
				line += " (unchanged)"
			}
			_, err = fmt.Fprintln(a.stdout, line)
			return err
		}),
	}
}

// warnSkillReport prints on stderr what a revision's report found that a
// reviewer should look at.
func (a *app) warnSkillReport(rev *client.SkillRevision) {
	for _, s := range rev.Report.Secrets {
		a.warnf("warning: %s:%d looks like a secret (%s); anyone who can read the skill can read it", s.Path, s.Line, s.Kind)
	}
	if len(rev.Report.UndeclaredHosts) > 0 {
		a.warnf("warning: the files name hosts the manifest does not declare (metadata network): %s; a script reaching one will fail",
			strings.Join(rev.Report.UndeclaredHosts, ", "))
	}
}

// shortDigest shortens a sha256 digest for tables.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// newSkillListCmd builds "genesis skill ls".
func newSkillListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the skills, the latest revision of each",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.SkillList, error) {
				items, err := c.ListSkills(ctx)
				if items == nil {
					items = []client.SkillRevision{}
				}
				return client.SkillList{Items: items}, err
			}, func(list client.SkillList) error {
				now := a.now()
				return printTable(a.stdout, "SKILL\tREVISION\tDIGEST\tFILES\tSIZE\tAGE\tDESCRIPTION", list.Items, func(tw io.Writer, r client.SkillRevision) {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\n", r.Name, r.Revision, shortDigest(r.Digest), len(r.Files), r.Size,
						shortDuration(now.Sub(r.CreatedAt)), firstLine(r.Manifest.Description, 60))
				})
			})
		}),
	}
}

// newSkillRevisionsCmd builds "genesis skill revisions".
func newSkillRevisionsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "revisions NAME",
		Short: "List a skill's revisions, newest first",
		Args:  exactArgs(1, "a skill name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.SkillRevisionList, error) {
				items, err := c.SkillRevisions(ctx, args[0])
				if items == nil {
					items = []client.SkillRevision{}
				}
				return client.SkillRevisionList{Items: items}, err
			}, func(list client.SkillRevisionList) error {
				return printTable(a.stdout, "REVISION\tDIGEST\tFILES\tSIZE\tCREATED", list.Items, func(tw io.Writer, r client.SkillRevision) {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\n", r.Revision, r.Digest, len(r.Files), r.Size, formatTime(r.CreatedAt))
				})
			})
		}),
	}
}

// getSkill gets revision rev of a skill (0: the latest).
func getSkill(ctx context.Context, c *client.Client, name string, rev int64) (*client.SkillRevision, error) {
	if rev > 0 {
		return c.GetSkillRevision(ctx, name, rev)
	}
	return c.GetSkill(ctx, name)
}

// checkRevision refuses a negative --revision.
func checkRevision(rev int64) error {
	if rev < 0 {
		return usageErrorf("--revision must be a positive revision number (0 or none: the latest)")
	}
	return nil
}

// newSkillGetCmd builds "genesis skill get".
func newSkillGetCmd(a *app) *cobra.Command {
	var rev int64
	cmd := &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"show"},
		Short:   "Show a skill revision: manifest, files and report",
		Args:    exactArgs(1, "a skill name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if err := checkRevision(rev); err != nil {
				return err
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.SkillRevision, error) {
				return getSkill(ctx, c, args[0], rev)
			}, a.printSkill)
		}),
	}
	cmd.Flags().Int64Var(&rev, "revision", 0, "the revision to show (default: the latest)")
	return cmd
}

// printSkill is the detail view of a revision.
func (a *app) printSkill(r *client.SkillRevision) error {
	m := r.Manifest
	if err := printFields(a.stdout, []field{
		{"Name", r.Name}, {"Revision", strconv.FormatInt(r.Revision, 10)}, {"Digest", r.Digest},
		{"Description", strings.Join(strings.Fields(m.Description), " ")}, {"License", m.License}, {"Allowed tools", strings.Join(m.AllowedTools, ", ")},
		{"Network", strings.Join(m.Network, ", ")}, {"Metadata", joinMap(m.Metadata)}, {"Source", r.Source},
		{"Size", strconv.FormatInt(r.Size, 10)}, {"Created", formatTime(r.CreatedAt)},
	}); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	if err := printTable(a.stdout, "PATH\tSIZE\tEXEC\tSHA256", r.Files, func(tw io.Writer, f client.SkillFile) {
		exec := "-"
		if f.Executable {
			exec = "x"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", f.Path, f.Size, exec, f.SHA256)
	}); err != nil {
		return err
	}
	rep := r.Report
	langs := make([]string, 0, len(rep.Scripts))
	for l := range rep.Scripts {
		langs = append(langs, l)
	}
	sort.Strings(langs)
	scripts := make([]string, len(langs))
	for i, l := range langs {
		scripts[i] = l + ": " + strings.Join(rep.Scripts[l], ", ")
	}
	secrets := make([]string, len(rep.Secrets))
	for i, s := range rep.Secrets {
		secrets[i] = fmt.Sprintf("%s:%d (%s)", s.Path, s.Line, s.Kind)
	}
	fmt.Fprintln(a.stdout)
	return printFields(a.stdout, []field{
		{"Scripts", orDash(strings.Join(scripts, "; "))}, {"Hosts", orDash(strings.Join(rep.Hosts, ", "))},
		{"Undeclared hosts", orDash(strings.Join(rep.UndeclaredHosts, ", "))}, {"Secret-like", orDash(strings.Join(secrets, ", "))},
	})
}

// newSkillCatCmd builds "genesis skill cat".
func newSkillCatCmd(a *app) *cobra.Command {
	var rev int64
	cmd := &cobra.Command{
		Use:   "cat NAME PATH",
		Short: "Write a file of a skill revision to stdout",
		Args:  exactArgs(2, "a skill name and a file path"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if err := checkRevision(rev); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			b, err := c.SkillFile(ctx, args[0], args[1], rev)
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(b)
			return err
		}),
	}
	cmd.Flags().Int64Var(&rev, "revision", 0, "the revision to read (default: the latest)")
	return cmd
}

// skillRunFlags are the flags of genesis skill run.
type skillRunFlags struct {
	rev         int64
	stdinFile   string
	interactive bool
	files       []string
	timeout     time.Duration
}

// build checks the flags and arguments (NAME SCRIPT [ARGS...]) and returns
// the skill's name and the request.
func (f *skillRunFlags) build(a *app, args []string) (string, client.SkillRunRequest, error) {
	req := client.SkillRunRequest{Revision: f.rev, Script: args[1], Args: args[2:]}
	if err := checkRevision(f.rev); err != nil {
		return "", req, err
	}
	if f.timeout < 0 {
		return "", req, usageErrorf("--timeout must not be negative")
	}
	req.TimeoutMS = int64((f.timeout + time.Millisecond - 1) / time.Millisecond)
	stdin := f.stdinFile
	switch {
	case f.interactive && stdin != "":
		return "", req, usageErrorf("give either -i or --stdin-file, not both")
	case f.interactive:
		stdin = "-"
	}
	if stdin != "" {
		text, b64, err := a.readStdin(stdin)
		if err != nil {
			return "", req, err
		}
		req.Stdin, req.StdinBase64 = text, b64
	}
	for _, spec := range f.files {
		local, remote := spec, filepath.Base(spec)
		if i := strings.LastIndexByte(spec, '='); i >= 0 {
			local, remote = spec[:i], spec[i+1:]
		}
		if local == "" || remote == "" {
			return "", req, usageErrorf("--file wants LOCAL=REMOTE (REMOTE relative to /workspace), got %q", spec)
		}
		b, err := os.ReadFile(local)
		if err != nil {
			return "", req, usageErrorf("--file: %v", err)
		}
		in := client.SkillInputFile{Path: remote}
		if utf8.Valid(b) {
			in.Content = string(b)
		} else {
			in.ContentBase64 = base64.StdEncoding.EncodeToString(b)
		}
		req.Files = append(req.Files, in)
	}
	return args[0], req, nil
}

// wait is how long the CLI waits for a run: its time limit plus a grace,
// or a default when it has none.
func (f *skillRunFlags) wait() time.Duration {
	if f.timeout > 0 {
		return f.timeout + execWaitGrace
	}
	return execWaitDefault
}

// newSkillRunCmd builds "genesis skill run".
func newSkillRunCmd(a *app) *cobra.Command {
	var f skillRunFlags
	cmd := &cobra.Command{
		Use:   "run [flags] NAME SCRIPT [-- ARGS...]",
		Short: "Run one of a skill's scripts in a sandbox of its own and relay its output and exit status",
		Long: `Run SCRIPT (a path inside the skill, e.g. scripts/fill.py) of skill NAME with
ARGS (after --, when one begins with -), in a new sandbox: the skill read-only
at /skill, the --file files in /workspace, no network unless the skill
declares hosts (and the service allows it). Python, shell and Node scripts
run with their interpreter; other files must be executable.

The script's stdout and stderr are written to this process's stdout and
stderr, the files it wrote below /workspace/out (kept as artifacts; see
genesis artifacts get) are listed on stderr, and genesis exits with the
script's exit status: 124 when it timed out, 128+N when killed by signal N.

Here --timeout is the run's time limit (0: the service default, 60s); the
call itself waits that long plus 30s.`,
		Args: minArgs(2, "a skill name and a script"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name, req, err := f.build(a, args)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), f.wait())
			defer cancel()
			run, err := c.RunSkill(ctx, name, req)
			if err != nil {
				return err
			}
			return a.relaySkillRun(run, f.timeout)
		}),
	}
	fl := cmd.Flags()
	fl.Int64Var(&f.rev, "revision", 0, "the revision to run (default: the latest)")
	fl.StringVar(&f.stdinFile, "stdin-file", "", "send this file as the script's stdin (- for this process's stdin)")
	fl.BoolVarP(&f.interactive, "stdin", "i", false, "send this process's stdin as the script's stdin (read to its end first)")
	fl.StringArrayVar(&f.files, "file", nil, "write local file LOCAL to /workspace/REMOTE before the script starts: LOCAL=REMOTE (repeatable)")
	// Shadows the global --timeout: here it is the run's limit.
	fl.DurationVar(&f.timeout, "timeout", 0, "the run's time limit, e.g. 30s (0: service default)")
	return cmd
}

// relaySkillRun writes a run's output, lists its artifacts and ends with
// the script's status.
func (a *app) relaySkillRun(run *client.SkillRun, timeout time.Duration) error {
	if a.jsonOutput() {
		if err := printJSON(a.stdout, run); err != nil {
			return err
		}
	} else {
		if _, err := io.WriteString(a.stdout, run.Stdout); err != nil {
			return err
		}
		if _, err := io.WriteString(a.stderr, run.Stderr); err != nil {
			return err
		}
		for _, art := range run.Artifacts {
			a.warnf("artifact %s %s (%d bytes)", art.ID, art.Path, art.Size)
		}
	}
	if run.StdoutTruncated {
		a.warnf("stdout truncated by the service")
	}
	if run.StderrTruncated {
		a.warnf("stderr truncated by the service")
	}
	e := jobEnd{reason: run.ExitReason, code: -1, durationMS: run.DurationMS}
	if run.ExitCode != nil {
		e.code = *run.ExitCode
	}
	return a.reportEnd(e, timeout)
}
