package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"genesis.dev/sandbox/api"
)

// Wire types of named volumes.
type (
	Volume              = api.Volume
	VolumeList          = api.VolumeList
	VolumeHolder        = api.VolumeHolder
	VolumeMount         = api.VolumeMount
	CreateVolumeRequest = api.CreateVolumeRequest
)

func volumePath(name, suffix string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("client: empty volume name")
	}
	return "/v1/volumes/" + url.PathEscape(name) + suffix, nil
}

// CreateVolume makes a named volume of sizeMB MiB.
func (c *Client) CreateVolume(ctx context.Context, name string, sizeMB int64) (*Volume, error) {
	var v Volume
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/volumes", body: CreateVolumeRequest{Name: name, SizeMB: sizeMB}, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListVolumes lists the caller's volumes by name.
func (c *Client) ListVolumes(ctx context.Context) ([]Volume, error) {
	var l VolumeList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/volumes", auth: true}, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// GetVolume returns one volume with the sandboxes that hold it.
func (c *Client) GetVolume(ctx context.Context, name string) (*Volume, error) {
	p, err := volumePath(name, "")
	if err != nil {
		return nil, err
	}
	var v Volume
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteVolume deletes a volume and its data (a mounted one is 409
// volume_in_use; a missing one succeeds).
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	p, err := volumePath(name, "")
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: p, auth: true}, nil)
}

// WriteVolumeFile uploads body as file path of a volume (whole or not at
// all; missing parents are made).
func (c *Client) WriteVolumeFile(ctx context.Context, name, path string, body io.Reader, opts WriteFileOptions) (*FileWritten, error) {
	p, err := volumePath(name, "/files")
	if err != nil {
		return nil, err
	}
	return c.upload(ctx, p, path, body, opts)
}

// ReadVolumeFile streams file path of a volume, or the part rng names.
func (c *Client) ReadVolumeFile(ctx context.Context, name, path string, rng *ByteRange) (*Download, error) {
	p, err := volumePath(name, "/files")
	if err != nil {
		return nil, err
	}
	return c.download(ctx, p, url.Values{"path": {path}}, rng)
}

// StatVolumeFile describes file path of a volume.
func (c *Client) StatVolumeFile(ctx context.Context, name, path string) (*FileInfo, error) {
	p, err := volumePath(name, "/files/stat")
	if err != nil {
		return nil, err
	}
	var v FileInfo
	if err := c.do(ctx, request{method: http.MethodGet, path: p, query: url.Values{"path": {path}}, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListVolumeFiles lists directory path of a volume (limit 0: the server's
// default).
func (c *Client) ListVolumeFiles(ctx context.Context, name, path string, limit int) (*FileList, error) {
	p, err := volumePath(name, "/files/list")
	if err != nil {
		return nil, err
	}
	q := url.Values{"path": {path}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var v FileList
	if err := c.do(ctx, request{method: http.MethodGet, path: p, query: q, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteVolumeFile deletes a file or directory of a volume.
func (c *Client) DeleteVolumeFile(ctx context.Context, name string, req DeleteFileRequest) error {
	p, err := volumePath(name, "/files/delete")
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodPost, path: p, body: req, auth: true}, nil)
}
