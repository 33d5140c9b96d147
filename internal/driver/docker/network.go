package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
)

var _ driver.Networker = (*Driver)(nil)

type networkCreateRequest struct {
	Name           string `json:"Name"`
	CheckDuplicate *bool  `json:"CheckDuplicate,omitempty"` // below API 1.44 only

	Driver   string            `json:"Driver"`
	Internal bool              `json:"Internal"`
	Labels   map[string]string `json:"Labels"`
	Options  map[string]string `json:"Options,omitempty"`
	IPAM     *networkIPAM      `json:"IPAM,omitempty"`
}

type networkIPAM struct {
	Driver string              `json:"Driver,omitempty"`
	Config []networkIPAMConfig `json:"Config"`
}

type networkIPAMConfig struct {
	Subnet  string `json:"Subnet,omitempty"`
	IPRange string `json:"IPRange,omitempty"`
}

type networkJSON struct {
	ID         string            `json:"Id"`
	Name       string            `json:"Name"`
	Internal   bool              `json:"Internal"`
	Labels     map[string]string `json:"Labels"`
	IPAM       networkIPAM       `json:"IPAM"`
	Containers map[string]struct {
		IPv4Address string `json:"IPv4Address"`
	} `json:"Containers"`
}

// bridgeNoHostAddress keeps Docker from giving the host side of an internal
// bridge an address, so that members cannot reach the host's own services.
const bridgeNoHostAddress = "com.docker.network.bridge.inhibit_ipv4"

// CreateNetwork creates a bridge network for spec.
func (d *Driver) CreateNetwork(ctx context.Context, spec driver.NetworkSpec) (string, error) {
	if err := validID(spec.Name); err != nil {
		return "", err
	}
	body := networkCreateRequest{Name: spec.Name, Driver: "bridge", Internal: spec.Internal, Labels: maps.Clone(spec.Labels)}
	if body.Labels == nil {
		body.Labels = map[string]string{}
	}
	body.Labels[driver.LabelManaged] = "true"
	if spec.Internal {
		body.Options = map[string]string{bridgeNoHostAddress: "true"}
	}
	if spec.Subnet != "" {
		p, err := netip.ParsePrefix(spec.Subnet)
		if err != nil || !p.Addr().Is4() || p.Masked() != p {
			return "", errdefs.Invalid("docker: create network %s: bad subnet %q", spec.Name, spec.Subnet)
		}
		cfg := networkIPAMConfig{Subnet: p.String()}
		if spec.DynamicRange != "" {
			r, err := netip.ParsePrefix(spec.DynamicRange)
			if err != nil || r.Masked() != r || !p.Contains(r.Addr()) || r.Bits() < p.Bits() {
				return "", errdefs.Invalid("docker: create network %s: dynamic range %q is not a prefix inside %s", spec.Name, spec.DynamicRange, p)
			}
			cfg.IPRange = r.String()
		}
		body.IPAM = &networkIPAM{Driver: "default", Config: []networkIPAMConfig{cfg}}
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	version, err := d.api.negotiate(ctx)
	if err != nil {
		return "", fmt.Errorf("docker: create network %s: %w", spec.Name, err)
	}
	if compareVersions(version, "1.44") < 0 {
		// Older daemons accept a duplicate name unless asked not to; from
		// 1.44 on a duplicate always fails and the field is deprecated.
		check := true
		body.CheckDuplicate = &check
	}
	var created struct {
		ID string `json:"Id"`
	}
	err = d.api.call(ctx, request{op: "create network " + spec.Name, method: http.MethodPost, path: "/networks/create", body: body}, &created)
	switch statusOf(err) {
	case 0:
	case http.StatusConflict:
		return "", fmt.Errorf("%w: %w", err, errdefs.ErrAlreadyExists)
	case http.StatusForbidden:
		// The daemon refuses a subnet that overlaps one in use.
		return "", fmt.Errorf("%w: %w", err, errdefs.ErrConflict)
	}
	if err != nil {
		return "", err
	}
	return created.ID, nil
}

func (d *Driver) inspectNetwork(ctx context.Context, name string) (networkJSON, error) {
	var n networkJSON
	err := d.api.call(ctx, request{op: "inspect network " + name, method: http.MethodGet, path: "/networks/" + name}, &n)
	return n, err
}

func networkStatus(n networkJSON) driver.NetworkStatus {
	st := driver.NetworkStatus{ID: n.ID, Name: n.Name, Internal: n.Internal, Labels: n.Labels, Members: map[string]string{}}
	if len(n.IPAM.Config) > 0 {
		st.Subnet = n.IPAM.Config[0].Subnet
	}
	for id, c := range n.Containers {
		addr, _, _ := strings.Cut(c.IPv4Address, "/")
		st.Members[id] = addr
	}
	return st
}

// InspectNetwork returns a network and its members.
func (d *Driver) InspectNetwork(ctx context.Context, name string) (driver.NetworkStatus, error) {
	if err := validID(name); err != nil {
		return driver.NetworkStatus{}, err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	n, err := d.inspectNetwork(ctx, name)
	if err != nil {
		return driver.NetworkStatus{}, err
	}
	return networkStatus(n), nil
}

// RemoveNetwork force-detaches all members and removes the network.
func (d *Driver) RemoveNetwork(ctx context.Context, name string) error {
	if err := validID(name); err != nil {
		return err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	n, err := d.inspectNetwork(ctx, name)
	if statusOf(err) == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	for id := range n.Containers {
		if err := d.disconnect(ctx, n.ID, id); err != nil {
			return err
		}
	}
	err = d.api.call(ctx, request{op: "remove network " + name, method: http.MethodDelete, path: "/networks/" + n.ID}, nil)
	if statusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// ConnectNetwork attaches a container and returns its IPv4 address there.
func (d *Driver) ConnectNetwork(ctx context.Context, network, container, addr string) (string, error) {
	if err := validID(network); err != nil {
		return "", err
	}
	if err := validID(container); err != nil {
		return "", err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	if got, ok, err := d.memberAddress(ctx, network, container); err != nil || ok {
		return got, err
	}
	body := map[string]any{"Container": container}
	if addr != "" {
		a, err := netip.ParseAddr(addr)
		if err != nil || !a.Is4() {
			return "", errdefs.Invalid("docker: connect %s to network %s: bad address %q", container, network, addr)
		}
		body["EndpointConfig"] = map[string]any{"IPAMConfig": map[string]string{"IPv4Address": a.String()}}
	}
	if err := d.api.call(ctx, request{op: "connect " + container + " to network " + network, method: http.MethodPost, path: "/networks/" + network + "/connect", body: body}, nil); err != nil {
		return "", err
	}
	got, ok, err := d.memberAddress(ctx, network, container)
	if err == nil && !ok {
		err = fmt.Errorf("docker: connect %s to network %s: no address assigned: %w", container, network, errdefs.ErrInternal)
	}
	return got, err
}

// memberAddress returns the container's address on network, if attached.
func (d *Driver) memberAddress(ctx context.Context, network, container string) (string, bool, error) {
	c, err := d.inspectRaw(ctx, container)
	if err != nil {
		return "", false, err
	}
	n, ok := c.NetworkSettings.Networks[network]
	if !ok || n.IPAddress == "" {
		// The network may be named by id.
		for _, m := range c.NetworkSettings.Networks {
			if m.NetworkID == network && m.IPAddress != "" {
				return m.IPAddress, true, nil
			}
		}
		return "", false, nil
	}
	return n.IPAddress, true, nil
}

// DisconnectNetwork force-detaches a container from a network.
func (d *Driver) DisconnectNetwork(ctx context.Context, network, container string) error {
	if err := validID(network); err != nil {
		return err
	}
	if err := validID(container); err != nil {
		return err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	return d.disconnect(ctx, network, container)
}

func (d *Driver) disconnect(ctx context.Context, network, container string) error {
	body := map[string]any{"Container": container, "Force": true}
	err := d.api.call(ctx, request{op: "disconnect " + container + " from network " + network, method: http.MethodPost, path: "/networks/" + network + "/disconnect", body: body}, nil)
	switch statusOf(err) {
	case http.StatusNotFound:
		return nil
	case http.StatusForbidden, http.StatusInternalServerError:
		// Not a member (the daemon answers 403 or 500 depending on version).
		if _, ok, ierr := d.memberAddress(ctx, network, container); ierr == nil && !ok {
			return nil
		}
	}
	return err
}

// ListNetworks returns every network labelled dev.genesis.managed=true,
// without members (use InspectNetwork for those).
func (d *Driver) ListNetworks(ctx context.Context) ([]driver.NetworkStatus, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	f, _ := json.Marshal(map[string][]string{"label": {driver.LabelManaged + "=true"}})
	var ns []networkJSON
	if err := d.api.call(ctx, request{op: "list networks", method: http.MethodGet, path: "/networks", query: url.Values{"filters": {string(f)}}}, &ns); err != nil {
		return nil, err
	}
	out := make([]driver.NetworkStatus, 0, len(ns))
	for _, n := range ns {
		n.Containers = nil
		out = append(out, networkStatus(n))
	}
	return out, nil
}
