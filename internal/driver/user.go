package driver

import (
	"strconv"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// ParseUser reads a container's user, "uid[:gid]" in numbers (the gid
// defaults to the uid; "" is root, 0:0). Anything else is
// errdefs.ErrInvalidArgument.
func ParseUser(u string) (uid, gid uint32, err error) {
	if u == "" {
		return 0, 0, nil
	}
	a, b, _ := strings.Cut(u, ":")
	x, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return 0, 0, errdefs.Invalid("user %q must be a numeric uid[:gid]", u)
	}
	y := x
	if b != "" {
		if y, err = strconv.ParseUint(b, 10, 32); err != nil {
			return 0, 0, errdefs.Invalid("user %q must be a numeric uid[:gid]", u)
		}
	}
	return uint32(x), uint32(y), nil
}
