package fake

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
)

// Network operations, for failure injection and hooks.
const (
	OpCreateNetwork     Op = "create_network"
	OpRemoveNetwork     Op = "remove_network"
	OpConnectNetwork    Op = "connect_network"
	OpDisconnectNetwork Op = "disconnect_network"
)

var _ driver.Networker = (*Driver)(nil)

type network struct {
	status driver.NetworkStatus
	next   netip.Addr // next address handed out
}

// CreateNetwork records a network. Without a subnet it gets one from
// 10.199.0.0/16 in /24 steps.
func (d *Driver) CreateNetwork(ctx context.Context, spec driver.NetworkSpec) (string, error) {
	if err := d.enter(ctx, OpCreateNetwork, spec.Name); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.networks {
		if n.status.Name == spec.Name {
			return "", fmt.Errorf("fake: network %s exists: %w", spec.Name, errdefs.ErrAlreadyExists)
		}
	}
	subnet := spec.Subnet
	if subnet == "" {
		subnet = fmt.Sprintf("10.199.%d.0/24", len(d.networks)%256)
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		return "", errdefs.Invalid("fake: bad subnet %q", subnet)
	}
	for _, n := range d.networks {
		if q, _ := netip.ParsePrefix(n.status.Subnet); q.Overlaps(p) {
			return "", fmt.Errorf("fake: subnet %s overlaps %s: %w", p, q, errdefs.ErrConflict)
		}
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[driver.LabelManaged] = "true"
	id := newID()
	d.networks[id] = &network{
		status: driver.NetworkStatus{ID: id, Name: spec.Name, Internal: spec.Internal, Subnet: p.String(), Labels: labels, Members: map[string]string{}},
		next:   dynamicStart(p, spec.DynamicRange),
	}
	return id, nil
}

func (d *Driver) lookupNetwork(name string) (*network, bool) {
	if n, ok := d.networks[name]; ok {
		return n, true
	}
	for _, n := range d.networks {
		if n.status.Name == name {
			return n, true
		}
	}
	return nil, false
}

func cloneNetwork(n *network) driver.NetworkStatus {
	st := n.status
	st.Labels, st.Members = maps.Clone(st.Labels), maps.Clone(st.Members)
	return st
}

// InspectNetwork returns a network and its members.
func (d *Driver) InspectNetwork(ctx context.Context, name string) (driver.NetworkStatus, error) {
	if err := d.enter(ctx, OpInspect, name); err != nil {
		return driver.NetworkStatus{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.lookupNetwork(name)
	if !ok {
		return driver.NetworkStatus{}, fmt.Errorf("fake: no such network %s: %w", name, errdefs.ErrNotFound)
	}
	return cloneNetwork(n), nil
}

// RemoveNetwork deletes a network; a missing one is not an error.
func (d *Driver) RemoveNetwork(ctx context.Context, name string) error {
	if err := d.enter(ctx, OpRemoveNetwork, name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n, ok := d.lookupNetwork(name); ok {
		delete(d.networks, n.status.ID)
	}
	return nil
}

// ConnectNetwork attaches a container and returns its address.
func (d *Driver) ConnectNetwork(ctx context.Context, network, container, want string) (string, error) {
	if err := d.enter(ctx, OpConnectNetwork, network); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.lookupNetwork(network)
	if !ok {
		return "", fmt.Errorf("fake: no such network %s: %w", network, errdefs.ErrNotFound)
	}
	c, err := d.lookup(container)
	if err != nil {
		return "", err
	}
	if a, ok := n.status.Members[c.status.ID]; ok {
		return a, nil
	}
	if c.spec.Network == "" || c.spec.Network == "none" {
		return "", errdefs.Invalid("fake: container %s has network mode none and cannot join %s", container, network)
	}
	addr := n.next.String()
	if want != "" {
		a, err := netip.ParseAddr(want)
		p, _ := netip.ParsePrefix(n.status.Subnet)
		if err != nil || !p.Contains(a) {
			return "", errdefs.Invalid("fake: address %q is not in %s", want, p)
		}
		for _, m := range n.status.Members {
			if m == want {
				return "", fmt.Errorf("fake: address %s in use: %w", want, errdefs.ErrConflict)
			}
		}
		addr = want
	} else {
		n.next = n.next.Next()
	}
	n.status.Members[c.status.ID] = addr
	return addr, nil
}

// DisconnectNetwork detaches a container; a non-member is not an error.
func (d *Driver) DisconnectNetwork(ctx context.Context, network, container string) error {
	if err := d.enter(ctx, OpDisconnectNetwork, network); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.lookupNetwork(network)
	if !ok {
		return nil
	}
	if c, err := d.lookup(container); err == nil {
		delete(n.status.Members, c.status.ID)
	}
	return nil
}

// ListNetworks returns every network, sorted by name.
func (d *Driver) ListNetworks(ctx context.Context) ([]driver.NetworkStatus, error) {
	if err := d.enter(ctx, OpList, ""); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]driver.NetworkStatus, 0, len(d.networks))
	for _, n := range d.networks {
		out = append(out, cloneNetwork(n))
	}
	slices.SortFunc(out, func(a, b driver.NetworkStatus) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out, nil
}

// networksOf returns the addresses of container id on every network. d.mu is held.
func (d *Driver) networksOf(id string) map[string]string {
	var out map[string]string
	for _, n := range d.networks {
		if a, ok := n.status.Members[id]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[n.status.Name] = a
		}
	}
	return out
}

// dynamicStart is the first address handed out without a request.
func dynamicStart(subnet netip.Prefix, dynamic string) netip.Addr {
	if r, err := netip.ParsePrefix(dynamic); err == nil && subnet.Contains(r.Addr()) {
		if r.Addr() == subnet.Addr() {
			return r.Addr().Next().Next()
		}
		return r.Addr()
	}
	return subnet.Addr().Next().Next()
}
