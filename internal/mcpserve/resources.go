package mcpserve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
)

// ResourceScheme is the URI scheme of a sandbox's files as MCP resources:
// sandbox://SANDBOX_ID/PATH, a path below the sandbox's home
// (sandbox://SANDBOX_ID//etc/x for an absolute one); a path that is empty
// or ends with / is a directory, read as its listing (JSON).
const ResourceScheme = "sandbox"

// ResourceURI is the resource URI of path in a sandbox.
func ResourceURI(sandboxID, path string) string {
	return ResourceScheme + "://" + sandboxID + "/" + path
}

// parseResourceURI splits a sandbox resource URI into the sandbox and the
// path (relative to the home unless it starts with /).
func parseResourceURI(uri string) (sandboxID, path string, ok bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != ResourceScheme || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", "", false
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), true
}

// addResources serves the files of the tenant's sandboxes as a resource
// template, and lists the sandboxes the session made.
func (s *Server) addResources(se *session) {
	se.srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: ResourceScheme + "://{sandbox_id}/{+path}", Name: "sandbox-file", Title: "A file of a sandbox",
		Description: "A file of one of your sandboxes: the path is below the sandbox's home (start it with / for an absolute one); " +
			"a path ending with / is a directory, read as its listing.", MIMEType: "text/plain"}, s.readResource(se))
}

// listSandbox lists a sandbox the session made as a resource (its home).
func (s *Server) listSandbox(se *session, id, profile string) {
	se.srv.AddResource(&sdk.Resource{URI: ResourceURI(id, ""), Name: id, Title: "Sandbox " + id + " (" + profile + ")",
		Description: "The home directory of sandbox " + id + ", made in this session; read it for its listing, or read its files through the sandbox-file template.",
		MIMEType:    "application/json"}, s.readResource(se))
}

func (s *Server) readResource(se *session) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		uri := req.Params.URI
		id, path, ok := parseResourceURI(uri)
		if !ok {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		notFound := func(err error) error {
			if errdefs.Is(err, errdefs.ErrNotFound) {
				return sdk.ResourceNotFoundError(uri)
			}
			return toolError(err)
		}
		if path == "" || strings.HasSuffix(path, "/") {
			list, err := s.cfg.Files.ListFiles(ctx, se.p.Tenant, id, path, 1, 0)
			if err != nil {
				return nil, notFound(err)
			}
			b, _ := json.Marshal(listOutput(list))
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
		}
		out, err := s.readFile(ctx, se.p.Tenant, PathInput{SandboxID: id, Path: path})
		if err != nil {
			return nil, notFound(err)
		}
		if out.ContentBase64 != "" {
			b, _ := base64.StdEncoding.DecodeString(out.ContentBase64)
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/octet-stream", Blob: b}}}, nil
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: out.Content}}}, nil
	}
}
