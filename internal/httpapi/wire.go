package httpapi

import "genesis.dev/sandbox/internal/apiwire"

// The conversions the handlers of other files call by these names; every
// conversion itself is in package apiwire (shared with the gRPC edge).
var (
	acquireLeaseInput       = apiwire.AcquireLeaseInput
	createSandboxInput      = apiwire.CreateSandboxInput
	diskQuotaWire           = apiwire.DiskQuota
	execIn                  = apiwire.ExecIn
	exitEventWire           = apiwire.ExitEvent
	fileListWire            = apiwire.FileList
	forkInput               = apiwire.ForkInput
	jobWire                 = apiwire.Job
	leaseWire               = apiwire.Lease
	madeWire                = apiwire.Made
	mcpApprovalWire         = apiwire.MCPApproval
	mcpCatalogEntryWire     = apiwire.MCPCatalogEntry
	mcpCreateIn             = apiwire.MCPCreateIn
	mcpPinWire              = apiwire.MCPPin
	mcpPinsWire             = apiwire.MCPPins
	mcpServerWire           = apiwire.MCPServer
	networkCapabilitiesWire = apiwire.NetworkCapabilities
	poolsWire               = apiwire.Pools
	profileWire             = apiwire.Profile
	replaceWire             = apiwire.Replace
	runCodeWire             = apiwire.RunCode
	sandboxWire             = apiwire.Sandbox
	searchWire              = apiwire.Search
	serviceStatusWire       = apiwire.ServiceStatus
	sessionWire             = apiwire.Session
	snapshotWire            = apiwire.Snapshot
)
