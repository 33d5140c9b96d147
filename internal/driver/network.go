package driver

import "context"

// Label values of LabelPurpose for the network plumbing.
const (
	PurposeSandbox        = "sandbox"
	PurposeEgressGateway  = "egress-gateway"
	PurposeSandboxNetwork = "sandbox-network"
	PurposeUpstream       = "egress-upstream"
)

// NetworkSpec describes a network to create.
type NetworkSpec struct {
	// Name is the network's name, unique on the host.
	Name string
	// Internal networks have no route out and no NAT: members reach only
	// each other. The host side of the bridge gets no address either, so
	// members cannot reach services of the host through it.
	Internal bool
	// Subnet is an IPv4 prefix in CIDR notation; empty lets the backend pick.
	Subnet string
	// DynamicRange, a prefix inside Subnet, is where addresses given out
	// without a request come from; the rest of Subnet stays free for
	// ConnectNetwork with an explicit address. Empty means all of Subnet.
	DynamicRange string
	// Labels are put on the network (merged with LabelManaged).
	Labels map[string]string
}

// NetworkStatus is what the backend reports about one network.
type NetworkStatus struct {
	ID       string
	Name     string
	Internal bool
	Subnet   string
	Labels   map[string]string
	// Members maps the id of each attached container to its IPv4 address.
	Members map[string]string
}

// Networker is implemented by drivers that can make networks and attach
// running containers to them (Capabilities.Networks). Every method is
// idempotent in the way the lifecycle methods are.
type Networker interface {
	// CreateNetwork makes a network and returns its id. A network of the same
	// name that exists already fails with errdefs.ErrAlreadyExists; a subnet
	// that overlaps another network fails with errdefs.ErrConflict.
	CreateNetwork(ctx context.Context, spec NetworkSpec) (string, error)
	// InspectNetwork returns one network by name or id; errdefs.ErrNotFound
	// if absent.
	InspectNetwork(ctx context.Context, name string) (NetworkStatus, error)
	// RemoveNetwork detaches every member and removes the network. Removing
	// a missing network succeeds.
	RemoveNetwork(ctx context.Context, name string) error
	// ConnectNetwork attaches a container to a network and returns its IPv4
	// address there: addr when not empty (it must lie in the network's
	// subnet), else one the backend picks. Connecting a member again returns
	// its address. A container in network mode none cannot be connected.
	ConnectNetwork(ctx context.Context, network, container, addr string) (string, error)
	// DisconnectNetwork detaches a container. Detaching a non-member, or
	// from a missing network, succeeds.
	DisconnectNetwork(ctx context.Context, network, container string) error
	// ListNetworks returns every network labelled as managed by this
	// service (any instance).
	ListNetworks(ctx context.Context) ([]NetworkStatus, error)
}
