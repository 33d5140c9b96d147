package client

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// UploadFile is one file of a multipart upload: Name is its path relative
// to the upload's directory (slash separated; parents are created).
type UploadFile struct {
	Name string
	Body io.Reader
}

// UploadOptions tune a multipart upload.
type UploadOptions struct {
	// Mode is the octal permission of every file ("" for 0644).
	Mode string
	// NoOverwrite makes an existing target a 409 file_exists (nothing is
	// then written).
	NoOverwrite bool
}

// UploadFiles writes several files below dir in one multipart request,
// streamed part by part (nothing is buffered whole). The upload is all or
// nothing: on an error no target was changed.
func (c *Client) UploadFiles(ctx context.Context, sandboxID, dir string, files []UploadFile, opts UploadOptions) (*UploadFilesResult, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	p += "/files"
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return nil, err
	}
	q := url.Values{"path": {dir}}
	if opts.Mode != "" {
		q.Set("mode", opts.Mode)
	}
	if opts.NoOverwrite {
		q.Set("overwrite", "false")
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeParts(mw, files))
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+p+"?"+q.Encode(), pr)
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("POST %s: %w", p, err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		pr.CloseWithError(err)
		return nil, err
	}
	defer drainClose(resp.Body)
	pr.CloseWithError(io.ErrClosedPipe) // the server answered; stop the writer
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return nil, newAPIError(resp.StatusCode, resp.Header, body)
	}
	var out UploadFilesResult
	if err := c.decode(resp, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// writeParts writes one form-data part per file, its name as the
// filename parameter: quoted when it is printable ASCII (slashes survive,
// unlike in a browser's), else RFC 2231 percent-encoded (filename*=).
func writeParts(mw *multipart.Writer, files []UploadFile) error {
	for i, f := range files {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="file` + strconv.Itoa(i) + `"; ` + filenameParam(f.Name)}
		h["Content-Type"] = []string{"application/octet-stream"}
		w, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, f.Body); err != nil {
			return fmt.Errorf("file %q: %w", f.Name, err)
		}
	}
	return mw.Close()
}

var quoteEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

func filenameParam(name string) string {
	plain := true
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] >= 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return `filename="` + quoteEscaper.Replace(name) + `"`
	}
	var b strings.Builder
	b.WriteString("filename*=UTF-8''")
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
