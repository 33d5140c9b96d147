package store

import (
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
)

// CheckVersion is the precondition of a conditional update: it returns
// errdefs.ErrPreconditionFailed when ifVersion is non-zero and differs from
// the stored version have. what names the record ("sandbox sb-1").
func CheckVersion(what string, have, ifVersion int64) error {
	if ifVersion != 0 && have != ifVersion {
		return fmt.Errorf("%s is at version %d, not %d: %w", what, have, ifVersion, errdefs.ErrPreconditionFailed)
	}
	return nil
}

// CheckLimit refuses a negative list limit (0 means no limit); op names the
// list call ("list jobs").
func CheckLimit(op string, limit int) error {
	if limit < 0 {
		return fmt.Errorf("%s: negative limit %d: %w", op, limit, errdefs.ErrInvalidArgument)
	}
	return nil
}
