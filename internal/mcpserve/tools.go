package mcpserve

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// Tool names.
const (
	ToolCreateSandbox  = "create_sandbox"
	ToolDestroySandbox = "destroy_sandbox"
	ToolExec           = "exec"
	ToolRunCode        = "run_code"
	ToolWriteFile      = "write_file"
	ToolReadFile       = "read_file"
	ToolListFiles      = "list_files"
	ToolSearchFiles    = "search_files"
	ToolStartJob       = "start_job"
	ToolJobLogs        = "job_logs"
)

const instructions = "Genesis Sandbox runs untrusted code in isolated sandboxes. Create a sandbox with " + ToolCreateSandbox +
	", then run commands (" + ToolExec + "), Python code whose variables persist between calls (" + ToolRunCode +
	"), read and write its files, or start a background job (" + ToolStartJob + ") and read its output (" + ToolJobLogs +
	"). The sandboxes you create are destroyed when this MCP session ends unless you create them with keep: true; " +
	"destroy them with " + ToolDestroySandbox + " when you are done."

// CreateSandboxInput is create_sandbox's input.
type CreateSandboxInput struct {
	Profile    string `json:"profile,omitempty" jsonschema:"the sandbox profile (its image and defaults), e.g. code-python-data; empty: the service's default"`
	Runtime    string `json:"runtime,omitempty" jsonschema:"the container runtime: runsc (gVisor) or runc; empty: what the risk level and the profile decide"`
	RiskLevel  string `json:"risk_level,omitempty" jsonschema:"how risky the code you will run is: low, medium or high; the service chooses the isolation from it and refuses a level above your ceiling"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty" jsonschema:"how long the sandbox may live, in seconds; 0: the default"`
	Keep       bool   `json:"keep,omitempty" jsonschema:"keep the sandbox after this MCP session ends (it still ends at its TTL); default false: destroyed with the session"`
	SnapshotID string `json:"snapshot_id,omitempty" jsonschema:"start the sandbox from a snapshot (snapshot_sandbox): its files, and its processes and memory where the snapshot holds them; profile and runtime are the snapshot's"`
}

// SandboxOutput describes a sandbox.
type SandboxOutput struct {
	SandboxID string     `json:"sandbox_id"`
	Profile   string     `json:"profile"`
	Runtime   string     `json:"runtime"`
	RiskLevel string     `json:"risk_level"`
	State     string     `json:"state"`
	Kept      bool       `json:"kept"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// SandboxIDInput names a sandbox.
type SandboxIDInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox's id (from create_sandbox)"`
}

// DestroyOutput is destroy_sandbox's output.
type DestroyOutput struct {
	SandboxID string `json:"sandbox_id"`
	Destroyed bool   `json:"destroyed"`
}

// ExecInput is the input of exec and start_job.
type ExecInput struct {
	SandboxID string            `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Command   []string          `json:"command,omitempty" jsonschema:"the program and its arguments, run without a shell (give command or script)"`
	Script    string            `json:"script,omitempty" jsonschema:"a shell script run with sh -c (give command or script)"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"the working directory, an absolute path; empty: the sandbox's home"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"extra environment variables"`
	Stdin     string            `json:"stdin,omitempty" jsonschema:"text given to the command on its standard input"`
	TimeoutMS int64             `json:"timeout_ms,omitempty" jsonschema:"the command is killed after this many milliseconds; 0: the service's default (exec) or none (start_job)"`
}

// ExecOutput is exec's output.
type ExecOutput struct {
	JobID      string `json:"job_id"`
	ExitCode   int    `json:"exit_code"`
	ExitReason string `json:"exit_reason" jsonschema:"exited, timeout, killed, canceled or lost"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// RunCodeInput is run_code's input.
type RunCodeInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Code      string `json:"code" jsonschema:"the code to run; variables, imports and functions persist between calls in the same sandbox and language"`
	Language  string `json:"language,omitempty" jsonschema:"the language: python (the default and only one)"`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"the run is stopped after this many milliseconds; 0: the default"`
}

// RunCodeOutput is run_code's output.
type RunCodeOutput struct {
	ContextID string `json:"context_id" jsonschema:"the code context the code ran in (one per sandbox and language in this session)"`
	Status    string `json:"status" jsonschema:"ok or error"`
	Value     string `json:"value,omitempty" jsonschema:"the value of the last expression, as text"`
	Error     string `json:"error,omitempty" jsonschema:"the exception, with its traceback"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Images    int    `json:"images,omitempty" jsonschema:"how many images (e.g. plots) the run made; they follow as image content"`
}

// WriteFileInput is write_file's input.
type WriteFileInput struct {
	SandboxID     string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Path          string `json:"path" jsonschema:"the file's path; relative paths are below the sandbox's home"`
	Content       string `json:"content,omitempty" jsonschema:"the file's text (give content or content_base64)"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's bytes in base64"`
	Mode          string `json:"mode,omitempty" jsonschema:"octal permissions, e.g. 0755; default 0644"`
}

// WriteFileOutput is write_file's output.
type WriteFileOutput struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// PathInput names a file or directory of a sandbox.
type PathInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Path      string `json:"path" jsonschema:"the path; relative paths are below the sandbox's home"`
}

// ReadFileOutput is read_file's output.
type ReadFileOutput struct {
	Path          string `json:"path"`
	Size          int64  `json:"size" jsonschema:"the bytes returned"`
	Content       string `json:"content,omitempty" jsonschema:"the file's text, when it is UTF-8"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's bytes in base64, when they are not UTF-8 text"`
	Truncated     bool   `json:"truncated,omitempty" jsonschema:"the file is longer than what was returned"`
}

// ListFilesInput is list_files's input.
type ListFilesInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Path      string `json:"path,omitempty" jsonschema:"the directory; empty: the sandbox's home"`
	Depth     int    `json:"depth,omitempty" jsonschema:"how many levels to descend; 0 or 1: the directory's own entries"`
}

// FileEntry is one entry of a listing.
type FileEntry struct {
	Path string `json:"path"`
	Type string `json:"type" jsonschema:"file, dir, symlink or other"`
	Size int64  `json:"size"`
	Mode string `json:"mode"`
}

// ListFilesOutput is list_files's output.
type ListFilesOutput struct {
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated,omitempty"`
}

// SearchFilesInput is search_files's input.
type SearchFilesInput struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Path       string `json:"path,omitempty" jsonschema:"the directory to search below; empty: the sandbox's home"`
	Glob       string `json:"glob,omitempty" jsonschema:"only files whose name matches, e.g. *.py"`
	Content    string `json:"content,omitempty" jsonschema:"the text to find in the files (without it: files found by name)"`
	Regex      bool   `json:"regex,omitempty" jsonschema:"content is an RE2 regular expression"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"at most this many matches; 0: the service's default"`
}

// SearchFilesOutput is search_files's output.
type SearchFilesOutput struct {
	Matches []SearchMatch `json:"matches"`
	// Truncated: max_results was reached or the search timed out.
	Truncated bool `json:"truncated,omitempty"`
}

// SearchMatch is a file found by name (line 0) or a matching line.
type SearchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line,omitempty"`
	Text string `json:"text,omitempty"`
}

// JobOutput describes a background job.
type JobOutput struct {
	JobID     string `json:"job_id"`
	SandboxID string `json:"sandbox_id"`
	State     string `json:"state" jsonschema:"running, succeeded, failed, timeout, canceled or lost"`
}

// JobLogsInput is job_logs's input.
type JobLogsInput struct {
	JobID  string `json:"job_id" jsonschema:"the job's id (from start_job)"`
	Cursor int64  `json:"cursor,omitempty" jsonschema:"where to read from: next_cursor of the previous call; 0: the start"`
	WaitMS int64  `json:"wait_ms,omitempty" jsonschema:"wait up to this many milliseconds (at most 60000) for the job to end before answering; 0: answer at once"`
}

// JobLogsOutput is job_logs's output.
type JobLogsOutput struct {
	JobID      string `json:"job_id"`
	State      string `json:"state"`
	Finished   bool   `json:"finished"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	NextCursor int64  `json:"next_cursor" jsonschema:"give it as cursor to read what follows"`
}

func ptr[T any](v T) *T { return &v }

// toolError is a refusal the model reads: the problem's stable code, then
// what went wrong.
func toolError(err error) error {
	return fmt.Errorf("%s: %w", errdefs.Code(err), err)
}

func invalid(format string, a ...any) error {
	return errdefs.WithCode("invalid_argument", errdefs.Invalid(format, a...))
}

// The core tools' shapes.
var (
	createSandboxTool = toolSpec{Name: ToolCreateSandbox, Title: "Create a sandbox",
		Description: "Create an isolated sandbox to run code in and return its id. The service picks the isolation (gVisor or runc) from the risk level and profile, " +
			"within your tenant's ceiling. The sandbox is destroyed when this MCP session ends unless keep is true.",
		Audit: true}
	destroySandboxTool = toolSpec{Name: ToolDestroySandbox, Title: "Destroy a sandbox",
		Description: "Destroy a sandbox and everything in it. Destroying one that is already gone succeeds.",
		Destructive: true, Idempotent: true, Audit: true}
	execTool = toolSpec{Name: ToolExec, Title: "Run a command",
		Description: "Run a command (or a shell script) in a sandbox and wait for it: its exit code, standard output and standard error. " +
			"Cancelling the call cancels the command.",
		Destructive: true, OpenWorld: true, Progress: true, Audit: true}
	runCodeTool = toolSpec{Name: ToolRunCode, Title: "Run code in a persistent context",
		Description: "Run Python code in a sandbox's code context, like a notebook cell: variables, imports and functions persist between calls " +
			"with the same sandbox and language in this session. Returns the last expression's value, the output, any exception, and images (plots) as image content.",
		Destructive: true, OpenWorld: true, Progress: true, Audit: true}
	writeFileTool = toolSpec{Name: ToolWriteFile, Title: "Write a file",
		Description: "Write a file in a sandbox (made with its parent directories; an existing file is replaced).",
		Destructive: true, Idempotent: true, Audit: true}
	listFilesTool = toolSpec{Name: ToolListFiles, Title: "List files",
		Description: "List a directory of a sandbox: each entry's path, type, size and mode.",
		ReadOnly:    true, Idempotent: true}
	searchFilesTool = toolSpec{Name: ToolSearchFiles, Title: "Search files",
		Description: "Find files of a sandbox by name (glob) and lines by content (text or a regular expression), below a directory.",
		ReadOnly:    true, Idempotent: true}
	startJobTool = toolSpec{Name: ToolStartJob, Title: "Start a background job",
		Description: "Start a command (or a shell script) in a sandbox in the background and return its job id at once; read its output and state with " + ToolJobLogs + ".",
		Destructive: true, OpenWorld: true, Audit: true}
	jobLogsTool = toolSpec{Name: ToolJobLogs, Title: "Read a background job's output",
		Description: "Read a background job's output from a cursor (0: the start), and its state and exit code once it ended. " +
			"Give wait_ms to wait for the job to end first.",
		ReadOnly: true, Idempotent: true, Progress: true}
)

// readFileTool is read_file's shape: its description names the service's
// limit.
func (s *Server) readFileTool() toolSpec {
	return toolSpec{Name: ToolReadFile, Title: "Read a file",
		Description: fmt.Sprintf("Read a file of a sandbox: its text, or its bytes in base64 when it is not UTF-8 text (at most %d bytes).", s.cfg.MaxReadBytes),
		ReadOnly:    true, Idempotent: true}
}

func (s *Server) addTools(se *session) {
	p := se.p
	addTool(s, se, createSandboxTool, func(ctx context.Context, req *sdk.CallToolRequest, in CreateSandboxInput) (*sdk.CallToolResult, SandboxOutput, string, error) {
		cin := control.CreateSandboxInput{Tenant: p.Tenant, Profile: in.Profile, Runtime: in.Runtime, RiskLevel: in.RiskLevel, TTLSeconds: in.TTLSeconds}
		var sb *sandbox.Sandbox
		var err error
		switch {
		case in.SnapshotID == "":
			sb, err = s.cfg.Sandboxes.CreateSandbox(ctx, cin)
		case s.cfg.Snapshots == nil:
			err = errdefs.WithCode("not_supported", fmt.Errorf("this service keeps no snapshots: %w", errdefs.ErrNotImplemented))
		default:
			var made *snapshots.Made
			if made, err = s.cfg.Snapshots.CreateFrom(ctx, in.SnapshotID, cin); err == nil {
				sb = made.Sandbox
			}
		}
		if err != nil {
			return nil, SandboxOutput{}, "", err
		}
		if !in.Keep {
			s.own(se, req.Session, sb.ID)
		}
		s.listSandbox(se, sb.ID, sb.Profile)
		return nil, sandboxOutput(sb, in.Keep), sb.ID, nil
	})
	addTool(s, se, destroySandboxTool, func(ctx context.Context, _ *sdk.CallToolRequest, in SandboxIDInput) (*sdk.CallToolResult, DestroyOutput, string, error) {
		if err := s.cfg.Sandboxes.DeleteSandbox(ctx, p.Tenant, in.SandboxID); err != nil {
			return nil, DestroyOutput{}, in.SandboxID, err
		}
		se.disown(in.SandboxID)
		se.srv.RemoveResources(ResourceURI(in.SandboxID, ""))
		return nil, DestroyOutput{SandboxID: in.SandboxID, Destroyed: true}, in.SandboxID, nil
	})
	addTool(s, se, execTool, func(ctx context.Context, _ *sdk.CallToolRequest, in ExecInput) (*sdk.CallToolResult, ExecOutput, string, error) {
		out, err := s.cfg.Jobs.Exec(ctx, execInput(p.Tenant, in))
		if err != nil {
			return nil, ExecOutput{}, in.SandboxID, err
		}
		res := execOutput(out)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: execText(res)}}}, res, out.Job.ID, nil
	})
	addTool(s, se, runCodeTool, func(ctx context.Context, _ *sdk.CallToolRequest, in RunCodeInput) (*sdk.CallToolResult, RunCodeOutput, string, error) {
		res, out, err := s.runCode(ctx, se, in)
		return res, out, in.SandboxID, err
	})
	addTool(s, se, writeFileTool, func(ctx context.Context, _ *sdk.CallToolRequest, in WriteFileInput) (*sdk.CallToolResult, WriteFileOutput, string, error) {
		out, err := s.writeFile(ctx, p.Tenant, in)
		return nil, out, in.SandboxID, err
	})
	addTool(s, se, s.readFileTool(), func(ctx context.Context, _ *sdk.CallToolRequest, in PathInput) (*sdk.CallToolResult, ReadFileOutput, string, error) {
		out, err := s.readFile(ctx, p.Tenant, in)
		return nil, out, in.SandboxID, err
	})
	addTool(s, se, listFilesTool, func(ctx context.Context, _ *sdk.CallToolRequest, in ListFilesInput) (*sdk.CallToolResult, ListFilesOutput, string, error) {
		list, err := s.cfg.Files.ListFiles(ctx, p.Tenant, in.SandboxID, in.Path, max(in.Depth, 1), 0)
		if err != nil {
			return nil, ListFilesOutput{}, in.SandboxID, err
		}
		return nil, listOutput(list), in.SandboxID, nil
	})
	addTool(s, se, searchFilesTool, func(ctx context.Context, _ *sdk.CallToolRequest, in SearchFilesInput) (*sdk.CallToolResult, SearchFilesOutput, string, error) {
		res, err := s.cfg.Files.SearchFiles(ctx, p.Tenant, in.SandboxID, agentproto.SearchRequest{Path: in.Path, Glob: in.Glob, Content: in.Content,
			Regex: in.Regex, IgnoreCase: in.IgnoreCase, MaxResults: in.MaxResults})
		if err != nil {
			return nil, SearchFilesOutput{}, in.SandboxID, err
		}
		out := SearchFilesOutput{Matches: make([]SearchMatch, 0, len(res.Matches)), Truncated: res.Truncated || res.TimedOut}
		for _, m := range res.Matches {
			out.Matches = append(out.Matches, SearchMatch{Path: m.Path, Line: m.Line, Text: m.Text})
		}
		return nil, out, in.SandboxID, nil
	})
	addTool(s, se, startJobTool, func(ctx context.Context, _ *sdk.CallToolRequest, in ExecInput) (*sdk.CallToolResult, JobOutput, string, error) {
		j, err := s.cfg.Jobs.StartJob(ctx, execInput(p.Tenant, in))
		if err != nil {
			return nil, JobOutput{}, in.SandboxID, err
		}
		return nil, JobOutput{JobID: j.ID, SandboxID: j.SandboxID, State: string(j.State)}, j.ID, nil
	})
	addTool(s, se, jobLogsTool, func(ctx context.Context, _ *sdk.CallToolRequest, in JobLogsInput) (*sdk.CallToolResult, JobLogsOutput, string, error) {
		out, err := s.jobLogs(ctx, p.Tenant, in)
		return nil, out, in.JobID, err
	})
}

func execInput(tenant string, in ExecInput) jobs.ExecInput {
	return jobs.ExecInput{Tenant: tenant, SandboxID: in.SandboxID, Command: in.Command, Script: in.Script, Cwd: in.Cwd, Env: in.Env,
		Stdin: []byte(in.Stdin), TimeoutMS: in.TimeoutMS}
}

func execOutput(out *jobs.ExecOutput) ExecOutput {
	j := out.Job
	res := ExecOutput{JobID: j.ID, ExitReason: string(j.ExitReason), Stdout: text(out.Stdout), Stderr: text(out.Stderr),
		Truncated: j.StdoutTruncated || j.StderrTruncated, DurationMS: out.DurationMS}
	if j.ExitCode != nil {
		res.ExitCode = *j.ExitCode
	}
	return res
}

// text is output as text; bytes that are not UTF-8 become U+FFFD.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// execText is an exec's result as the model reads it.
func execText(r ExecOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d (%s)", r.ExitCode, r.ExitReason)
	if r.Truncated {
		b.WriteString(", output truncated")
	}
	if r.Stdout != "" {
		b.WriteString("\n--- stdout\n" + r.Stdout)
	}
	if r.Stderr != "" {
		b.WriteString("\n--- stderr\n" + r.Stderr)
	}
	return b.String()
}

// runCode runs code in the session's context of the sandbox and language,
// made on the first call.
func (s *Server) runCode(ctx context.Context, se *session, in RunCodeInput) (*sdk.CallToolResult, RunCodeOutput, error) {
	lang := in.Language
	if lang == "" {
		lang = "python"
	}
	key := contextKey{sandbox: in.SandboxID, language: lang}
	se.mu.Lock()
	id := se.contexts[key]
	se.mu.Unlock()
	if id == "" {
		cx, err := s.cfg.Jobs.CreateContext(ctx, se.p.Tenant, in.SandboxID, lang)
		if err != nil {
			return nil, RunCodeOutput{}, err
		}
		id = cx.ID
		se.mu.Lock()
		if prev := se.contexts[key]; prev != "" {
			id = prev // a concurrent first call made one first; this one's ends with the sandbox
		} else {
			se.contexts[key] = id
		}
		se.mu.Unlock()
	}
	r, err := s.cfg.Jobs.RunCode(ctx, se.p.Tenant, id, in.Code, in.TimeoutMS)
	if err != nil {
		return nil, RunCodeOutput{}, err
	}
	return runCodeResult(id, r)
}

// runCodeResult is a run as the model reads it: a text summary, the
// images as image content, and the structured output.
func runCodeResult(contextID string, r *jobs.RunResult) (*sdk.CallToolResult, RunCodeOutput, error) {
	out := RunCodeOutput{ContextID: contextID, Status: r.Status}
	if r.Exec != nil {
		out.Stdout, out.Stderr = text(r.Exec.Stdout), text(r.Exec.Stderr)
	}
	if r.Value != nil {
		out.Value = *r.Value
	}
	if r.Error != nil {
		out.Error = r.Error.Name + ": " + r.Error.Value
		if len(r.Error.Traceback) > 0 {
			out.Error += "\n" + strings.Join(r.Error.Traceback, "\n")
		}
	}
	var b strings.Builder
	if out.Stdout != "" {
		b.WriteString(out.Stdout)
	}
	if out.Stderr != "" {
		b.WriteString("--- stderr\n" + out.Stderr)
	}
	if out.Error != "" {
		b.WriteString("--- error\n" + out.Error + "\n")
	}
	if out.Value != "" {
		b.WriteString(out.Value)
	}
	if b.Len() == 0 {
		b.WriteString("(no output)")
	}
	content := []sdk.Content{&sdk.TextContent{Text: b.String()}}
	for _, o := range r.Outputs {
		if !strings.HasPrefix(o.MIME, "image/") {
			continue
		}
		data, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil {
			continue
		}
		content = append(content, &sdk.ImageContent{Data: data, MIMEType: o.MIME})
		out.Images++
	}
	return &sdk.CallToolResult{Content: content}, out, nil
}

func (s *Server) writeFile(ctx context.Context, tenant string, in WriteFileInput) (WriteFileOutput, error) {
	data := []byte(in.Content)
	if in.ContentBase64 != "" {
		if in.Content != "" {
			return WriteFileOutput{}, invalid("content and content_base64 are mutually exclusive")
		}
		b, err := base64.StdEncoding.DecodeString(in.ContentBase64)
		if err != nil {
			return WriteFileOutput{}, invalid("content_base64 is not valid base64")
		}
		data = b
	}
	if in.Path == "" {
		return WriteFileOutput{}, invalid("path is required")
	}
	res, err := s.cfg.Files.WriteFile(ctx, files.WriteFileInput{Tenant: tenant, SandboxID: in.SandboxID, Path: in.Path, Mode: in.Mode,
		Overwrite: true, Size: int64(len(data)), Body: bytes.NewReader(data)})
	if err != nil {
		return WriteFileOutput{}, err
	}
	return WriteFileOutput{Path: res.Path, Size: res.Size}, nil
}

func (s *Server) readFile(ctx context.Context, tenant string, in PathInput) (ReadFileOutput, error) {
	if in.Path == "" {
		return ReadFileOutput{}, invalid("path is required")
	}
	fr, cancel, err := s.cfg.Files.ReadFile(ctx, tenant, in.SandboxID, "GET", in.Path, nil)
	if err != nil {
		return ReadFileOutput{}, err
	}
	defer cancel()
	defer fr.Body.Close()
	b, more, err := readAll(fr.Body, s.cfg.MaxReadBytes)
	if err != nil {
		return ReadFileOutput{}, fmt.Errorf("reading %s: %v: %w", in.Path, err, errdefs.ErrUnavailable)
	}
	out := ReadFileOutput{Path: in.Path, Size: int64(len(b)), Truncated: more}
	if utf8.Valid(b) {
		out.Content = string(b)
	} else {
		out.ContentBase64 = base64.StdEncoding.EncodeToString(b)
	}
	return out, nil
}

func listOutput(l agentproto.FileList) ListFilesOutput {
	out := ListFilesOutput{Path: l.Path, Entries: make([]FileEntry, 0, len(l.Entries)), Truncated: l.Truncated}
	for _, e := range l.Entries {
		out.Entries = append(out.Entries, FileEntry{Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Mode})
	}
	return out
}

// maxJobLogBytes bounds the output one job_logs call returns.
const maxJobLogBytes = 1 << 20

func (s *Server) jobLogs(ctx context.Context, tenant string, in JobLogsInput) (JobLogsOutput, error) {
	if in.WaitMS < 0 || in.WaitMS > 60000 {
		return JobLogsOutput{}, invalid("wait_ms %d is not between 0 and 60000", in.WaitMS)
	}
	j, l, err := s.cfg.Jobs.JobLog(ctx, tenant, in.JobID)
	if err != nil {
		return JobLogsOutput{}, err
	}
	if ok, err := l.ValidCursor(in.Cursor); err != nil || !ok {
		return JobLogsOutput{}, invalid("cursor %d is not a position of the job's log (give next_cursor of the previous call)", in.Cursor)
	}
	out := JobLogsOutput{JobID: j.ID, NextCursor: in.Cursor}
	var stdout, stderr strings.Builder
	rctx := ctx
	follow := in.WaitMS > 0
	if follow {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, time.Duration(in.WaitMS)*time.Millisecond)
		defer cancel()
	}
	full := errStop
	err = l.Read(rctx, in.Cursor, follow, func(e joblog.Event) error {
		switch e.Type {
		case agentproto.FrameStdout:
			stdout.Write(e.Payload)
		case agentproto.FrameStderr:
			stderr.Write(e.Payload)
		case agentproto.FrameExit:
			out.Finished = true
		}
		out.NextCursor = e.Cursor
		if stdout.Len()+stderr.Len() >= maxJobLogBytes {
			return full
		}
		return nil
	})
	if err != nil && err != full && rctx.Err() == nil {
		return JobLogsOutput{}, err
	}
	if ctx.Err() != nil {
		return JobLogsOutput{}, ctx.Err()
	}
	out.Stdout, out.Stderr = text([]byte(stdout.String())), text([]byte(stderr.String()))
	// The record after the read: a job whose exit was read is final.
	if j2, _, err := s.cfg.Jobs.JobLog(ctx, tenant, in.JobID); err == nil {
		j = j2
	}
	out.State, out.ExitCode = string(j.State), j.ExitCode
	if j.State.Final() {
		out.Finished = true
	}
	return out, nil
}

// errStop ends a log read early (the reply is full).
var errStop = fmt.Errorf("reply full")
