package control

import (
	"genesis.dev/sandbox/internal/admission"
	"genesis.dev/sandbox/internal/store"
)

// Types of control's API that other packages define.

// The list filters of control's API. They are the store's filters, which
// control validates and passes through; callers name them here, so the
// API layer does not depend on the store package.
type (
	// SandboxFilter selects sandboxes for ListSandboxes.
	SandboxFilter = store.SandboxFilter
	// LeaseFilter selects leases for ListLeases.
	LeaseFilter = store.LeaseFilter
)

// The admission figures AdmissionStats reports (the admission package's
// own types, named here for the API layer).
type (
	// AdmissionStats is the state of host admission.
	AdmissionStats = admission.Stats
	// AdmissionTenantStats is one tenant's queue and counters.
	AdmissionTenantStats = admission.TenantStats
	// AdmissionCapacity is an amount of host capacity.
	AdmissionCapacity = admission.Capacity
)
