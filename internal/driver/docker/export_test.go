package docker

import (
	"context"
)

// RawHostConfig is the daemon's view of a container's host config, for tests.
type RawHostConfig = hostConfig

// InspectHostConfig returns the raw HostConfig and Config.User of a container.
func (d *Driver) InspectHostConfig(ctx context.Context, id string) (RawHostConfig, string, error) {
	c, err := d.inspectRaw(ctx, id)
	return c.HostConfig, c.Config.User, err
}
