package docker

import (
	"context"
	"net/http"
	"net/url"
)

// RawHostConfig is the daemon's view of a container's host config, for tests.
type RawHostConfig = hostConfig

// InspectHostConfig returns the raw HostConfig and Config.User of a container.
func (d *Driver) InspectHostConfig(ctx context.Context, id string) (RawHostConfig, string, error) {
	c, err := d.inspectRaw(ctx, id)
	return c.HostConfig, c.Config.User, err
}

// RemoveImage force-removes an image; a missing image is not an error.
func (d *Driver) RemoveImage(ctx context.Context, ref string) error {
	err := d.api.call(ctx, request{op: "remove image", method: http.MethodDelete, path: "/images/" + ref, query: url.Values{"force": {"1"}}}, nil)
	if statusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}
