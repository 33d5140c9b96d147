package client

import (
	"context"
	"net/http"
)

// ListArtifacts returns the artifacts of a job.
func (c *Client) ListArtifacts(ctx context.Context, jobID string) (*ArtifactList, error) {
	p, err := idPath("/v1/jobs/", jobID)
	if err != nil {
		return nil, err
	}
	var v ArtifactList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/artifacts", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetArtifact returns the metadata of an artifact.
func (c *Client) GetArtifact(ctx context.Context, id string) (*Artifact, error) {
	p, err := idPath("/v1/artifacts/", id)
	if err != nil {
		return nil, err
	}
	var v Artifact
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/meta", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DownloadArtifact streams the content of an artifact, or the part rng
// names. ETag is the quoted SHA-256.
func (c *Client) DownloadArtifact(ctx context.Context, id string, rng *ByteRange) (*Download, error) {
	p, err := idPath("/v1/artifacts/", id)
	if err != nil {
		return nil, err
	}
	return c.download(ctx, p, nil, rng)
}
