package grpcedge

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/tenancy"
)

// sandboxService serves genesis.sandbox.v1.SandboxService over control,
// as httpapi's handlers.go and leases.go serve the same routes.
type sandboxService struct{ edge *Edge }

func invalidArg(format string, args ...any) error {
	return errdefs.Invalid(format, args...)
}

func (s *sandboxService) GetCapabilities(ctx context.Context, _ *connect.Request[sandboxv1.GetCapabilitiesRequest]) (*connect.Response[sandboxv1.Capabilities], error) {
	ctl := s.edge.ctl
	p := ctl.Probe(ctx)
	dq := ctl.DiskQuota(ctx)
	views, err := ctl.Profiles(ctx)
	if err != nil {
		return nil, err
	}
	c := &sandboxv1.Capabilities{
		Driver: p.Driver, Healthy: p.Healthy, Error: p.Error, DaemonVersion: p.DaemonVersion, ApiVersion: p.APIVersion,
		KernelVersion: p.KernelVersion, CgroupVersion: p.CgroupVersion,
		Checkpoint: &sandboxv1.Feature{Supported: p.Checkpoint.Supported, Method: p.Checkpoint.Method, Reason: p.Checkpoint.Reason},
		DiskQuota:  &sandboxv1.Feature{Supported: dq.Enforced, Enforced: dq.Enforced, Method: dq.Method, Reason: dq.Reason},
		RiskPolicy: map[string]*sandboxv1.RuntimeList{},
		CheckTime:  ts(p.CheckedAt),
	}
	for level, rts := range policy.RiskPolicy(p.RuntimeNames()) {
		c.RiskPolicy[level] = &sandboxv1.RuntimeList{Runtimes: rts}
	}
	for _, rt := range p.Runtimes {
		c.Runtimes = append(c.Runtimes, &sandboxv1.RuntimeInfo{Name: rt.Name, Path: rt.Path, Version: rt.Version,
			Healthy: rt.Healthy, Error: rt.Error, SmokeMs: rt.SmokeMS, CheckTime: ts(rt.CheckedAt)})
	}
	for _, v := range views {
		c.Profiles = append(c.Profiles, profilePB(v))
	}
	return connect.NewResponse(c), nil
}

func (s *sandboxService) ListProfiles(ctx context.Context, _ *connect.Request[sandboxv1.ListProfilesRequest]) (*connect.Response[sandboxv1.ListProfilesResponse], error) {
	views, err := s.edge.ctl.Profiles(ctx)
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.ListProfilesResponse{}
	for _, v := range views {
		out.Profiles = append(out.Profiles, profilePB(v))
	}
	return connect.NewResponse(out), nil
}

func (s *sandboxService) CreateSandbox(ctx context.Context, req *connect.Request[sandboxv1.CreateSandboxRequest]) (*connect.Response[sandboxv1.Sandbox], error) {
	m := req.Msg
	in := control.CreateSandboxInput{
		Tenant: tenantOf(ctx), Profile: m.Profile, Runtime: m.Runtime, RiskLevel: m.RiskLevel, Resources: resourcesIn(m.Resources),
		Env: m.Env, Metadata: m.Metadata, TTLSeconds: m.TtlSeconds, ReadOnlyRoot: m.ReadOnlyRoot,
		IdempotencyKey: m.IdempotencyKey, WaitSeconds: m.WaitSeconds, Network: policyIn(m.Network),
	}
	sb, made, err := snapshots.Create(ctx, s.edge.ctl, s.edge.wl.Snapshots, m.SnapshotId, in)
	if err != nil {
		return nil, err
	}
	if made != nil {
		return connect.NewResponse(madePB(made)), nil
	}
	return connect.NewResponse(sandboxPB(sb)), nil
}

// madePB is a sandbox made from a snapshot, with what came back of it.
func madePB(m *snapshots.Made) *sandboxv1.Sandbox {
	out := sandboxPB(m.Sandbox)
	out.MemoryRestored = &m.Memory
	out.SessionsFromSnapshot = m.Sessions
	return out
}

func (s *sandboxService) GetSandbox(ctx context.Context, req *connect.Request[sandboxv1.GetSandboxRequest]) (*connect.Response[sandboxv1.Sandbox], error) {
	sb, err := s.edge.ctl.GetSandbox(ctx, tenantOf(ctx), req.Msg.Id)
	if err != nil {
		return nil, err
	}
	out := sandboxPB(sb)
	if p, ok := s.edge.ctl.ProfileConfig(sb.Profile); ok {
		out.Endpoints = endpointsPB(s.edge.publicURL, sb.ID, p)
	}
	if s.edge.wl.Services != nil {
		for _, st := range s.edge.wl.Services.Of(sb.ID) {
			out.Services = append(out.Services, serviceStatusPB(st))
		}
	}
	return connect.NewResponse(out), nil
}

// Page sizes of ListSandboxes.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

func (s *sandboxService) ListSandboxes(ctx context.Context, req *connect.Request[sandboxv1.ListSandboxesRequest]) (*connect.Response[sandboxv1.ListSandboxesResponse], error) {
	m := req.Msg
	scope, err := tenancy.ListScope(tenantOf(ctx), principalOf(ctx).Admin, m.Tenant)
	if err != nil {
		return nil, err
	}
	f := control.SandboxFilter{Tenant: scope, Profile: m.Profile, Metadata: m.Metadata}
	for _, st := range m.States {
		f.States = append(f.States, sandbox.State(st))
	}
	size := int(m.PageSize)
	switch {
	case size < 0:
		return nil, invalidArg("page_size %d is negative", size)
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	query := listQuery(tenantOf(ctx), m)
	var after *pageKey
	if m.PageToken != "" {
		k, err := parsePageToken(m.PageToken, query)
		if err != nil {
			return nil, err
		}
		after = &k
	}
	list, err := s.edge.ctl.ListSandboxes(ctx, f)
	if err != nil {
		return nil, err
	}
	// Pages follow (create time, id): a sandbox made between two pages
	// comes on a later page or not at all, never twice.
	slices.SortFunc(list, func(a, b *sandbox.Sandbox) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	out := &sandboxv1.ListSandboxesResponse{}
	for _, sb := range list {
		k := pageKey{created: sb.CreatedAt.UnixNano(), id: sb.ID}
		if after != nil && !after.before(k) {
			continue
		}
		if len(out.Sandboxes) == size {
			last := out.Sandboxes[len(out.Sandboxes)-1]
			out.NextPageToken = pageKey{created: last.CreateTime.AsTime().UnixNano(), id: last.Id}.token(query)
			break
		}
		out.Sandboxes = append(out.Sandboxes, sandboxPB(sb))
	}
	return connect.NewResponse(out), nil
}

// pageKey is where a page of ListSandboxes ended.
type pageKey struct {
	created int64
	id      string
}

func (k pageKey) before(o pageKey) bool {
	return k.created < o.created || (k.created == o.created && k.id < o.id)
}

// listQuery identifies a listing's caller and filters, so a page token
// serves only the listing that made it.
func listQuery(caller string, m *sandboxv1.ListSandboxesRequest) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q", caller, m.Tenant, m.Profile, m.States)
	for _, k := range slices.Sorted(maps.Keys(m.Metadata)) {
		fmt.Fprintf(h, " %q=%q", k, m.Metadata[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (k pageKey) token(query string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(query + "." + strconv.FormatInt(k.created, 10) + "." + k.id))
}

func parsePageToken(tok, query string) (pageKey, error) {
	bad := errdefs.WithCode("invalid_page_token", invalidArg("page_token is not one this listing returned (same filters)"))
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return pageKey{}, bad
	}
	q, rest, ok := strings.Cut(string(b), ".")
	if !ok || q != query {
		return pageKey{}, bad
	}
	ns, id, ok := strings.Cut(rest, ".")
	created, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return pageKey{}, bad
	}
	return pageKey{created: created, id: id}, nil
}

func (s *sandboxService) DeleteSandbox(ctx context.Context, req *connect.Request[sandboxv1.DeleteSandboxRequest]) (*connect.Response[sandboxv1.DeleteSandboxResponse], error) {
	if err := s.edge.ctl.DeleteSandbox(ctx, tenantOf(ctx), req.Msg.Id); err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.DeleteSandboxResponse{}), nil
}

func (s *sandboxService) UpdateSandboxMetadata(ctx context.Context, req *connect.Request[sandboxv1.UpdateSandboxMetadataRequest]) (*connect.Response[sandboxv1.Sandbox], error) {
	m := req.Msg
	var version int64
	if m.ResourceVersion != "" {
		v, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
		if err != nil || v <= 0 {
			return nil, errdefs.WithCode("invalid_resource_version", invalidArg("resource_version %q is not one the service handed out", m.ResourceVersion))
		}
		version = v
	}
	patch := make(map[string]*string, len(m.Metadata)+len(m.RemoveKeys))
	for k, v := range m.Metadata {
		patch[k] = &v
	}
	for _, k := range m.RemoveKeys {
		if _, both := m.Metadata[k]; both {
			return nil, invalidArg("metadata key %q is both set and removed", k)
		}
		patch[k] = nil
	}
	sb, err := s.edge.ctl.PatchSandbox(ctx, tenantOf(ctx), m.Id, version, patch)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sandboxPB(sb)), nil
}

func (s *sandboxService) RenewSandbox(ctx context.Context, req *connect.Request[sandboxv1.RenewSandboxRequest]) (*connect.Response[sandboxv1.Sandbox], error) {
	sb, err := s.edge.ctl.RenewSandbox(ctx, tenantOf(ctx), req.Msg.Id, req.Msg.TtlSeconds)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sandboxPB(sb)), nil
}

func (s *sandboxService) AcquireLease(ctx context.Context, req *connect.Request[sandboxv1.AcquireLeaseRequest]) (*connect.Response[sandboxv1.Lease], error) {
	m := req.Msg
	in := control.AcquireLeaseInput{
		Tenant: tenantOf(ctx), Profile: m.Profile, RiskLevel: m.RiskLevel, Runtime: m.Runtime, TTLSeconds: m.TtlSeconds,
		Holder: m.Holder, WaitSeconds: m.WaitSeconds, Env: m.Env, Metadata: m.Metadata, Resources: resourcesIn(m.Resources),
		Network: policyIn(m.Network),
	}
	out, made, err := snapshots.Lease(ctx, s.edge.ctl, s.edge.wl.Snapshots, m.SnapshotId, in)
	if err != nil {
		return nil, err
	}
	l := leasePB(out.Lease)
	l.Sandbox = sandboxPB(out.Sandbox)
	if made != nil {
		l.Sandbox = madePB(made)
	}
	return connect.NewResponse(l), nil
}

func (s *sandboxService) GetLease(ctx context.Context, req *connect.Request[sandboxv1.GetLeaseRequest]) (*connect.Response[sandboxv1.Lease], error) {
	l, err := s.edge.ctl.GetLease(ctx, tenantOf(ctx), req.Msg.LeaseId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(leasePB(l)), nil
}

func (s *sandboxService) ListLeases(ctx context.Context, req *connect.Request[sandboxv1.ListLeasesRequest]) (*connect.Response[sandboxv1.ListLeasesResponse], error) {
	f := control.LeaseFilter{Tenant: tenantOf(ctx)}
	for _, st := range req.Msg.States {
		f.States = append(f.States, sandbox.LeaseState(st))
	}
	list, err := s.edge.ctl.ListLeases(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.ListLeasesResponse{}
	for _, l := range list {
		out.Leases = append(out.Leases, leasePB(l))
	}
	return connect.NewResponse(out), nil
}

func (s *sandboxService) RenewLease(ctx context.Context, req *connect.Request[sandboxv1.RenewLeaseRequest]) (*connect.Response[sandboxv1.Lease], error) {
	l, err := s.edge.ctl.RenewLease(ctx, tenantOf(ctx), req.Msg.LeaseId, req.Msg.TtlSeconds)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(leasePB(l)), nil
}

func (s *sandboxService) ReleaseLease(ctx context.Context, req *connect.Request[sandboxv1.ReleaseLeaseRequest]) (*connect.Response[sandboxv1.ReleaseLeaseResponse], error) {
	if err := s.edge.ctl.ReleaseLeaseNoWait(ctx, tenantOf(ctx), req.Msg.LeaseId); err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.ReleaseLeaseResponse{}), nil
}
