package e2b

import (
	"path"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// The E2B sandbox user's home, where the SDKs' relative paths and default
// working directory point, is this service's workspace: paths under it are
// translated both ways.
const (
	e2bHome   = "/home/user"
	workspace = "/workspace"
)

// sandboxPath translates a path of the SDK into the sandbox's: relative
// and /home/user paths land in /workspace; "" stays "" (the default).
func sandboxPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", errdefs.Invalid("path contains NUL")
	}
	if !path.IsAbs(p) {
		p = workspace + "/" + p
	}
	p = path.Clean(p)
	if p == e2bHome || strings.HasPrefix(p, e2bHome+"/") {
		p = workspace + strings.TrimPrefix(p, e2bHome)
	}
	return p, nil
}

// sdkPath translates a sandbox path back into the SDK's view.
func sdkPath(p string) string {
	if p == workspace || strings.HasPrefix(p, workspace+"/") {
		return e2bHome + strings.TrimPrefix(p, workspace)
	}
	return p
}
