package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"genesis.dev/sandbox/internal/driver/docker"
)

// findSelf returns the container of the Docker daemon this service runs in
// (nil on the daemon's host). There the daemon resolves bind-mount sources
// on its own host, so the data dir must lie on a volume or bind mount of
// the container: otherwise no sandbox could mount its agent, run directory
// or workspace, and the service refuses to start saying so.
func findSelf(ctx context.Context, dcfg docker.Config, dataDir string, log *slog.Logger) (*docker.SelfContainer, error) {
	d, err := docker.New(dcfg)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	self, err := d.FindSelf(ctx)
	if err != nil {
		return nil, fmt.Errorf("the service runs in a container but cannot ask the Docker daemon about it (is the daemon's socket mounted?): %w", err)
	}
	if self == nil {
		return nil, nil
	}
	host, err := self.HostPath(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	log.Info("running in a container of the Docker daemon: bind-mount sources are translated to the daemon's host",
		"container", self.ID[:min(12, len(self.ID))], "data_dir", dataDir, "data_dir_on_docker_host", host)
	return self, nil
}

// reachableAddr is the address a client on this machine uses for the
// listener at a: loopback when it listens on every address (0.0.0.0 or
// [::], as in the service's container, whose published port is on the
// host's 127.0.0.1 with the documented command).
func reachableAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
}
