package drivertest

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// RunNetworks runs the conformance cases of driver.Networker: the
// capability flag agrees with the interface, and networks are created,
// joined at create and by connect, listed, left and removed idempotently.
// subnet is a free IPv4 /28 the suite may use; "" lets the driver pick.
func RunNetworks(t *testing.T, newDriver func(t *testing.T) Harness, subnet string) {
	t.Run("NetworksCapability", func(t *testing.T) {
		t.Parallel()
		h := newDriver(t)
		_, ok := h.Driver.(driver.Networker)
		if got := h.Driver.Capabilities().Networks; got != ok {
			t.Errorf("Capabilities().Networks = %v, but implements driver.Networker = %v", got, ok)
		}
	})
	for _, rt := range newDriverRuntimes(t, newDriver) {
		name := string(rt)
		if name == "" {
			name = "default"
		}
		t.Run("Networks/Runtime="+name, func(t *testing.T) {
			networks(t, newDriver(t), rt, subnet)
		})
	}
}

func networks(t *testing.T, h Harness, rt sandbox.Runtime, subnet string) {
	nw, ok := h.Driver.(driver.Networker)
	if !ok {
		t.Skip("driver has no networks")
	}
	ctx := callCtx(t)
	tag := token()
	name := "genesis-conf-net-" + tag
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := nw.RemoveNetwork(ctx, name); err != nil {
			t.Errorf("cleanup: RemoveNetwork: %v", err)
		}
	})
	dynamic := ""
	if subnet != "" {
		// The upper half of the subnet for picked addresses.
		p := netip.MustParsePrefix(subnet)
		b := p.Addr().As4()
		b[3] += byte(1 << (32 - p.Bits() - 1))
		dynamic = netip.PrefixFrom(netip.AddrFrom4(b), p.Bits()+1).String()
	}
	id, err := nw.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Internal: true, Subnet: subnet, DynamicRange: dynamic,
		Labels: map[string]string{driver.LabelSandbox: "conf-" + tag}})
	if err != nil {
		t.Fatalf("CreateNetwork: %v", err)
	}
	if _, err := nw.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Internal: true}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("second CreateNetwork: %v; want ErrAlreadyExists", err)
	}
	st, err := nw.InspectNetwork(ctx, name)
	if err != nil || st.ID != id || !st.Internal || st.Labels[driver.LabelManaged] != "true" {
		t.Fatalf("InspectNetwork = %+v, %v; want id %s, internal, managed label", st, err, id)
	}
	prefix, err := netip.ParsePrefix(st.Subnet)
	if err != nil || (subnet != "" && st.Subnet != subnet) {
		t.Errorf("network subnet %q (%v); want %q", st.Subnet, err, subnet)
	}
	listed, err := nw.ListNetworks(ctx)
	found := false
	for _, n := range listed {
		found = found || n.Name == name
	}
	if err != nil || !found {
		t.Errorf("ListNetworks = %d entries, %v; want %s among them", len(listed), err, name)
	}

	// One container joins at create, a second (made on another network: a
	// container in network mode none cannot join any) by connect.
	home := name + "-home"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := nw.RemoveNetwork(ctx, home); err != nil {
			t.Errorf("cleanup: RemoveNetwork: %v", err)
		}
	})
	if _, err := nw.CreateNetwork(ctx, driver.NetworkSpec{Name: home, Internal: true}); err != nil {
		t.Fatalf("CreateNetwork: %v", err)
	}
	spec := baseSpec(h, rt, tag)
	spec.Network = name
	member, err := h.Driver.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create on network: %v", err)
	}
	removeLater(t, h.Driver, member)
	spec2 := baseSpec(h, rt, tag+"b")
	spec2.Network = home
	joiner, err := h.Driver.Create(ctx, spec2)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	removeLater(t, h.Driver, joiner)
	for _, c := range []string{member, joiner} {
		if err := h.Driver.Start(ctx, c); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	want := ""
	if subnet != "" {
		// An explicit address outside the dynamic range.
		want = prefix.Addr().Next().Next().String()
	}
	addr, err := nw.ConnectNetwork(ctx, name, joiner, want)
	if err != nil {
		t.Fatalf("ConnectNetwork: %v", err)
	}
	if a, err := netip.ParseAddr(addr); err != nil || !prefix.Contains(a) || (want != "" && addr != want) {
		t.Errorf("ConnectNetwork address %q (%v) not in %s or not the requested %q", addr, err, prefix, want)
	}
	if subnet != "" {
		if m, _ := nw.InspectNetwork(ctx, name); m.Members[member] == "" || !netip.MustParsePrefix(dynamic).Contains(netip.MustParseAddr(m.Members[member])) {
			t.Errorf("member address %q outside the dynamic range %s", m.Members[member], dynamic)
		}
	}
	if again, err := nw.ConnectNetwork(ctx, name, joiner, ""); err != nil || again != addr {
		t.Errorf("second ConnectNetwork = %q, %v; want %q, nil", again, err, addr)
	}
	ins, err := h.Driver.Inspect(ctx, joiner)
	if err != nil || ins.Networks[name] != addr {
		t.Errorf("Inspect(joiner).Networks = %v, %v; want %s → %s", ins.Networks, err, name, addr)
	}
	st, _ = nw.InspectNetwork(ctx, name)
	if len(st.Members) != 2 || st.Members[joiner] != addr || st.Members[member] == "" {
		t.Errorf("network members = %v; want %s and %s", st.Members, member, joiner)
	}
	if err := nw.DisconnectNetwork(ctx, name, joiner); err != nil {
		t.Errorf("DisconnectNetwork: %v", err)
	}
	if err := nw.DisconnectNetwork(ctx, name, joiner); err != nil {
		t.Errorf("second DisconnectNetwork: %v; want nil", err)
	}
	if st, _ = nw.InspectNetwork(ctx, name); len(st.Members) != 1 {
		t.Errorf("members after disconnect = %v; want only %s", st.Members, member)
	}
	// Removing a network with a member detaches it.
	if err := nw.RemoveNetwork(ctx, name); err != nil {
		t.Fatalf("RemoveNetwork with a member: %v", err)
	}
	if err := nw.RemoveNetwork(ctx, name); err != nil {
		t.Errorf("second RemoveNetwork: %v; want nil", err)
	}
	if _, err := nw.InspectNetwork(ctx, name); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("InspectNetwork after remove: %v; want ErrNotFound", err)
	}
}
