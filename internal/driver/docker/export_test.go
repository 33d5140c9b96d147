package docker

import (
	"context"

	"genesis.dev/sandbox/internal/driver"
)

// RawHostConfig is the daemon's view of a container's host config, for tests.
type RawHostConfig = hostConfig

// InspectHostConfig returns the raw HostConfig and Config.User of a container.
func (d *Driver) InspectHostConfig(ctx context.Context, id string) (RawHostConfig, string, error) {
	c, err := d.inspectRaw(ctx, id)
	return c.HostConfig, c.Config.User, err
}

// NativeSeccompOpt is the seccomp option a runc container gets, for tests.
func NativeSeccompOpt() string { return nativeSeccompOpt() }

// BuildCreateForTest returns the security options of spec's create request.
func BuildCreateForTest(spec driver.Spec) ([]string, error) {
	r, err := buildCreate(spec)
	return r.HostConfig.SecurityOpt, err
}
