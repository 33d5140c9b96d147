package skills

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
)

// The skills MCP server: every tenant has one, at /v1/mcp/skills under the
// tenant's own API key. Its resources are the tenant's skills (each
// revision's files at skill://NAME/PATH, the latest revision's SKILL.md
// listed); its tools list the skills and run a script, each run in a
// sandbox of its own exactly as POST /v1/skills/{name}/runs does.

// ResourceScheme is the URI scheme of skill files.
const ResourceScheme = "skill"

// RunToolName is the tool that runs a skill's script.
const RunToolName = "run_skill_script"

// ListToolName is the tool that lists the tenant's skills.
const ListToolName = "list_skills"

// RunToolInput is the input of run_skill_script.
type RunToolInput struct {
	Skill       string      `json:"skill" jsonschema:"the skill's name"`
	Script      string      `json:"script" jsonschema:"the path of one of the skill's scripts, relative to its root, e.g. scripts/run.py"`
	Args        []string    `json:"args,omitempty" jsonschema:"arguments after the script"`
	Stdin       string      `json:"stdin,omitempty" jsonschema:"standard input of the script"`
	StdinBase64 string      `json:"stdin_base64,omitempty" jsonschema:"standard input as base64, for bytes that are not text"`
	Revision    int64       `json:"revision,omitempty" jsonschema:"the revision to run; 0 or absent: the latest"`
	Files       []InputFile `json:"files,omitempty" jsonschema:"files written to the workspace (/workspace) before the script starts"`
	TimeoutMS   int64       `json:"timeout_ms,omitempty" jsonschema:"the run's timeout in milliseconds (default 60000)"`
}

// RunToolOutput is the structured result of run_skill_script.
type RunToolOutput struct {
	Skill      string        `json:"skill"`
	Revision   int64         `json:"revision"`
	Digest     string        `json:"digest"`
	State      string        `json:"state"`
	ExitCode   *int          `json:"exit_code,omitempty"`
	Stdout     string        `json:"stdout"`
	Stderr     string        `json:"stderr"`
	Runtime    string        `json:"runtime"`
	Network    string        `json:"network"`
	JobID      string        `json:"job_id"`
	Artifacts  []ArtifactRef `json:"artifacts"`
	DurationMS int64         `json:"duration_ms"`
}

// ArtifactRef is an output file of a run.
type ArtifactRef struct {
	ID     string `json:"id"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// URL is the API path that downloads it (with the tenant's key).
	URL string `json:"url"`
}

// SkillSummary is one entry of list_skills.
type SkillSummary struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Revision    int64               `json:"revision"`
	Digest      string              `json:"digest"`
	Scripts     map[string][]string `json:"scripts"`
	// URI is the skill's SKILL.md as a resource.
	URI string `json:"uri"`
}

// ListToolOutput is the structured result of list_skills.
type ListToolOutput struct {
	Skills []SkillSummary `json:"skills"`
}

// ResourceURI is the URI of a file of a skill.
func ResourceURI(name, p string) string {
	return ResourceScheme + "://" + name + "/" + (&url.URL{Path: p}).EscapedPath()
}

// MCPHandler serves the tenant's skills MCP server. tenantOf gives the
// authenticated tenant of a request (the API authenticates it first). It
// is stateless: each request is served by a server of its own tenant, so
// no session can cross tenants.
func (m *Manager) MCPHandler(tenantOf func(*http.Request) string, version string) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		return m.mcpServer(r.Context(), tenantOf(r), version)
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, PropagateRequestCancellation: true,
		// The API authenticates every request with the tenant's key, a
		// bearer token no browser sends by itself; the Host check would
		// refuse a service behind a proxy on loopback.
		DisableLocalhostProtection: true,
		Logger:                     slog.New(slog.DiscardHandler)})
}

func (m *Manager) mcpServer(ctx context.Context, tenant, version string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "genesis-skills", Title: "Genesis Sandbox skills", Version: version},
		&sdk.ServerOptions{Instructions: "Skills are folders of instructions (SKILL.md) and scripts. Read a skill's SKILL.md resource, then run one of its scripts with " +
			RunToolName + "; each run is sandboxed, with the skill read-only at " + MountDir + " and files written below " + OutputDir + " returned as artifacts."})
	if list, err := m.List(ctx, tenant); err == nil {
		for _, rev := range list {
			s.AddResource(&sdk.Resource{URI: ResourceURI(rev.Name, "SKILL.md"), Name: rev.Name, Title: rev.Name,
				Description: rev.Manifest.Description, MIMEType: "text/markdown", Size: sizeOf(rev, "SKILL.md")},
				m.readResource(tenant))
		}
	} else {
		m.log.Warn("listing skills for the skills MCP server", "tenant", tenant, "err", err)
	}
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: ResourceScheme + "://{skill}/{+path}", Name: "skill-file",
		Description: "A file of a skill's latest revision (add ?revision=N for another).", MIMEType: "text/plain"}, m.readResource(tenant))
	sdk.AddTool(s, &sdk.Tool{Name: ListToolName, Description: "List the skills you can run: name, description, revision and scripts by language.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, ListToolOutput, error) {
			list, err := m.List(ctx, tenant)
			if err != nil {
				return nil, ListToolOutput{}, err
			}
			out := ListToolOutput{Skills: []SkillSummary{}}
			for _, rev := range list {
				out.Skills = append(out.Skills, SkillSummary{Name: rev.Name, Description: rev.Manifest.Description, Revision: rev.Revision,
					Digest: rev.Digest, Scripts: rev.Report.Scripts, URI: ResourceURI(rev.Name, "SKILL.md")})
			}
			return nil, out, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: RunToolName, Description: "Run one of a skill's own scripts in a new sandbox (gVisor for uploaded skills, no network unless the skill declares it). " +
		"Returns its exit code, output and the files it wrote below " + OutputDir + " as artifacts."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in RunToolInput) (*sdk.CallToolResult, RunToolOutput, error) {
			run, err := m.Run(ctx, tenant, in.Skill, RunRequest{Revision: in.Revision, Script: in.Script, Args: in.Args, Stdin: in.Stdin,
				StdinBase64: in.StdinBase64, Files: in.Files, TimeoutMS: in.TimeoutMS})
			target := in.Skill + "/" + in.Script
			if err != nil {
				m.audit(ctx, tenant, target, cmp.Or(errdefs.Code(err), "error"))
				// A refused run is the tool's error, for the model to read.
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}, RunToolOutput{}, nil
			}
			m.audit(ctx, tenant, fmt.Sprintf("%s@%d/%s job=%s", run.Skill, run.Revision, run.Script, run.JobID), "")
			out := RunToolOutput{Skill: run.Skill, Revision: run.Revision, Digest: run.Digest, State: run.State, ExitCode: run.ExitCode,
				Stdout: run.Stdout, Stderr: run.Stderr, Runtime: string(run.Decision.Runtime), Network: run.Decision.Network, JobID: run.JobID,
				Artifacts: []ArtifactRef{}, DurationMS: run.DurationMS}
			for _, a := range run.Artifacts {
				out.Artifacts = append(out.Artifacts, ArtifactRef{ID: a.ID, Path: a.Path, Size: a.Size, SHA256: a.SHA256, URL: "/v1/artifacts/" + a.ID})
			}
			text := run.Stdout
			if run.State != "succeeded" {
				text = fmt.Sprintf("the script ended %s (exit code %s)\n--- stdout\n%s\n--- stderr\n%s", run.State, exitText(run.ExitCode), run.Stdout, run.Stderr)
			}
			body, _ := json.Marshal(out)
			return &sdk.CallToolResult{IsError: run.State != "succeeded", Content: []sdk.Content{&sdk.TextContent{Text: text}},
				StructuredContent: json.RawMessage(body)}, out, nil
		})
	return s
}

func exitText(c *int) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprint(*c)
}

func sizeOf(rev *Revision, p string) int64 {
	if f, ok := findFile(rev.Files, p); ok {
		return f.Size
	}
	return 0
}

func (m *Manager) audit(ctx context.Context, tenant, target, code string) {
	if m.cfg.Audit != nil {
		m.cfg.Audit(ctx, tenant, "skills-mcp "+RunToolName, target, code)
	}
}

// readResource reads skill://NAME/PATH[?revision=N] from the tenant's
// skills.
func (m *Manager) readResource(tenant string) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		uri := req.Params.URI
		u, err := url.Parse(uri)
		if err != nil || u.Scheme != ResourceScheme || u.Host == "" {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		var rev int64
		if v := u.Query().Get("revision"); v != "" {
			if _, err := fmt.Sscan(v, &rev); err != nil || rev < 1 {
				return nil, sdk.ResourceNotFoundError(uri)
			}
		}
		r, err := m.Get(ctx, tenant, u.Host, rev)
		if err != nil {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		p := strings.TrimPrefix(u.Path, "/")
		data, err := m.ReadFile(ctx, r, p)
		if err != nil {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		c := &sdk.ResourceContents{URI: uri, MIMEType: mimeOf(p)}
		if strings.HasPrefix(c.MIMEType, "text/") || c.MIMEType == "application/json" {
			c.Text = string(data)
		} else {
			c.Blob = data
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}, nil
	}
}

// FileContentType is the Content-Type a skill's file p is served with by
// the HTTP API: SKILL.md and the scripts as UTF-8 text (shown, never run,
// by a browser), any other file by its extension, else
// application/octet-stream. (An MCP resource's type is mimeOf's.)
func FileContentType(p string) string {
	switch path.Ext(p) {
	case ".md", ".py", ".sh":
		return "text/plain; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func mimeOf(p string) string {
	switch path.Ext(p) {
	case ".md":
		return "text/markdown"
	case ".py", ".sh", ".js", ".mjs", ".txt", ".yaml", ".yml", ".toml", ".csv", "":
		return "text/plain"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		t, _, _ = strings.Cut(t, ";")
		return t
	}
	return "application/octet-stream"
}
