// Package local is the Sandboxer of backends that run sandboxes on the
// service's own host (Docker): each sandbox gets a directory below the data
// dir holding its run directory (the agent's Unix socket) and its workspace
// (a loop-mounted filesystem when it has a disk quota), the agent binary is
// bind-mounted read-only from the service's host, and the agent is reached
// through its socket. It wraps a container-level driver.Driver; like every
// driver package it knows neither records nor tenants.
package local
