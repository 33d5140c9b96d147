package tenancy

import (
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
)

// ListScope is the tenant whose sandboxes a listing shows: the caller's
// own unless it asks for another one (asked), which only an admin key may
// ("*" for every tenant's: the empty tenant of a SandboxFilter).
func ListScope(caller string, admin bool, asked string) (string, error) {
	if asked == "" || asked == caller {
		return caller, nil
	}
	if !admin {
		return "", errdefs.WithCode("admin_required", fmt.Errorf("only an admin key may list another tenant's sandboxes: %w", errdefs.ErrPermissionDenied))
	}
	if asked == "*" {
		return "", nil
	}
	return asked, nil
}
