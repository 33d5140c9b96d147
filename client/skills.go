package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Skills: a folder with SKILL.md (YAML front matter: name, description,
// optional license, allowed-tools and metadata) and the files its
// instructions use, pushed as a tar, tar.gz or zip and kept as immutable
// revisions. A run executes one of a revision's own scripts in a sandbox of
// its own, the revision read-only at /skill; what the script writes below
// /workspace/out is kept as the job's artifacts. The tenant's skills are
// also an MCP server (SkillsMCPURL) under the tenant's API key.

// skillPath is /v1/skills/{name}, refusing an empty name.
func skillPath(name string) (string, error) { return idPath("/v1/skills/", name) }

// SkillsMCPURL is the absolute URL of the tenant's skills MCP server
// (Streamable HTTP, stateless). An MCP client connects to it with the
// tenant's API key as its bearer token.
func (c *Client) SkillsMCPURL() string { return c.baseURL + "/v1/mcp/skills" }

// PushSkill calls POST /v1/skills with archive (a tar, tar.gz or zip of a
// folder holding SKILL.md) as the body, sent as contentType ("" for
// application/octet-stream). created is false when the skill's latest
// revision already had this content (that revision is returned).
func (c *Client) PushSkill(ctx context.Context, archive io.Reader, contentType string) (rev *SkillRevision, created bool, err error) {
	if archive == nil {
		return nil, false, errors.New("client: no skill archive")
	}
	if contentType == "" {
		contentType = SkillArchiveBytes
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/v1/skills", raw: archive, rawLen: -1,
		header: http.Header{"Content-Type": {contentType}}, auth: true})
	if err != nil {
		return nil, false, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return nil, false, newAPIError(resp.StatusCode, resp.Header, body)
	}
	var v SkillRevision
	if err := c.decode(resp, &v); err != nil {
		return nil, false, err
	}
	return &v, resp.StatusCode == http.StatusCreated, nil
}

// ListSkills calls GET /v1/skills: the latest revision of each skill.
func (c *Client) ListSkills(ctx context.Context) ([]SkillRevision, error) {
	var v SkillList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/skills", auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

// GetSkill calls GET /v1/skills/{name}: its latest revision.
func (c *Client) GetSkill(ctx context.Context, name string) (*SkillRevision, error) {
	p, err := skillPath(name)
	if err != nil {
		return nil, err
	}
	var v SkillRevision
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// SkillRevisions calls GET /v1/skills/{name}/revisions: every revision,
// newest first.
func (c *Client) SkillRevisions(ctx context.Context, name string) ([]SkillRevision, error) {
	p, err := skillPath(name)
	if err != nil {
		return nil, err
	}
	var v SkillRevisionList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/revisions", auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

// GetSkillRevision calls GET /v1/skills/{name}/revisions/{revision}.
func (c *Client) GetSkillRevision(ctx context.Context, name string, rev int64) (*SkillRevision, error) {
	p, err := skillPath(name)
	if err != nil {
		return nil, err
	}
	if rev < 1 {
		return nil, fmt.Errorf("client: skill revision must be positive, got %d", rev)
	}
	var v SkillRevision
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/revisions/" + strconv.FormatInt(rev, 10), auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// SkillFile calls GET /v1/skills/{name}/files/{path}: the content of the
// file p (slash-separated, relative to the skill's root) of revision rev
// (0: the latest).
func (c *Client) SkillFile(ctx context.Context, name, p string, rev int64) ([]byte, error) {
	sp, err := skillPath(name)
	if err != nil {
		return nil, err
	}
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil, errors.New("client: empty skill file path")
	}
	if rev < 0 {
		return nil, fmt.Errorf("client: skill revision must not be negative, got %d", rev)
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	var q url.Values
	if rev > 0 {
		q = url.Values{"revision": {strconv.FormatInt(rev, 10)}}
	}
	d, err := c.download(ctx, sp+"/files/"+strings.Join(segs, "/"), q, nil)
	if err != nil {
		return nil, err
	}
	defer drainClose(d.Body)
	b, err := io.ReadAll(io.LimitReader(d.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("GET %s/files/%s: %w", sp, p, err)
	}
	return b, nil
}

// RunSkill calls POST /v1/skills/{name}/runs and waits for the script to
// end. A script that exits non-zero is a run (state failed), not an
// error; a refused run (network not allowed, risk above the ceiling, no
// such script) fails with an *APIError.
func (c *Client) RunSkill(ctx context.Context, name string, req SkillRunRequest) (*SkillRun, error) {
	p, err := skillPath(name)
	if err != nil {
		return nil, err
	}
	var v SkillRun
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/runs", body: req, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
