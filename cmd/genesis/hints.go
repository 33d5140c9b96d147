package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"genesis.dev/sandbox/client"
)

// codeHints says, for problem codes a person meets at the command line,
// which command or flag helps. The service's problem detail says what went
// wrong; a hint never names an HTTP route.
var codeHints = map[string]string{
	"admin_required":          "pass the admin key with --api-key (or GENESIS_API_KEY); `make run` keeps one in .data/admin_key",
	"profile_not_found":       "`genesis profiles` lists the profiles and their images",
	"pool_not_found":          "`genesis pool ls` lists the warm pools",
	"snapshot_in_use":         "`genesis pool ls` shows the pools fed from snapshots; remove the pool's snapshot_id from the service config and restart it first",
	"runtime_unavailable":     "`genesis capabilities` shows the runtimes this host has and the risk policy",
	"runtime_not_allowed":     "`genesis capabilities` shows which risk levels may use which runtime",
	"catalog_entry_not_found": "`genesis mcp catalog` lists the catalog entries",
	"sandbox_not_running":     "`genesis sandbox ls` shows the sandboxes and their states",
	"port_unreachable":        "start a server on that port inside the sandbox; `genesis job ls SANDBOX` shows whether the job that served it still runs",
	"no_space":                "the sandbox's workspace is full: delete files in it, or create the sandbox with a larger --disk-mb",
	"paused":                  "`genesis trace resume SANDBOX` (or `genesis trace step SANDBOX`) lets the agent act again",
	"aborted":                 "`genesis trace resume SANDBOX` lets the agent act again",
	"control_held":            "`genesis desktop control SANDBOX wait` waits for the person to hand control back",

	// A sandbox's saved state (genesis sandbox pause|hibernate|snapshot).
	"sandbox_paused":                "`genesis sandbox resume SANDBOX` thaws it",
	"sandbox_hibernated":            "`genesis sandbox resume SANDBOX` wakes it (so does the next call that needs it running)",
	"memory_checkpoint_unsupported": "this sandbox keeps files only (its runtime or its network): `genesis sandbox snapshot SANDBOX --memory=false` takes them",
}

// failure is what printError says about err: the message, and a hint of
// what to do (empty when there is nothing to add).
func (a *app) failure(err error) (msg, hint string) {
	var ae *client.APIError
	if errors.As(err, &ae) {
		msg = ae.Message()
		switch {
		case ae.Status == http.StatusUnauthorized && a.key() == "":
			return "no API key was given", "set GENESIS_API_KEY or pass --api-key; `make run` prints the key and keeps it in .data/api_key"
		case ae.Status == http.StatusUnauthorized:
			return msg, fmt.Sprintf("the service at %s did not accept the key of GENESIS_API_KEY or --api-key", a.baseURL())
		case ae.Problem.Code == "route_not_found":
			return msg, fmt.Sprintf("is %s a Genesis service as new as this CLI (`genesis version`)? Set GENESIS_URL or pass --url", a.baseURL())
		}
		if hint := codeHints[ae.Problem.Code]; !names(msg, hint) {
			return msg, hint
		}
		return msg, ""
	}
	if isUnreachable(err) {
		return fmt.Sprintf("cannot reach the Genesis service at %s: %v", a.baseURL(), dialCause(err)),
			"is it running (`make run`, or `sandbox-service serve`)? If it listens elsewhere, set GENESIS_URL or pass --url"
	}
	return err.Error(), ""
}

// names reports whether msg already names the command that hint quotes
// (its words before the first placeholder in capitals, such as SANDBOX):
// the service's detail often says what to run, and once is enough.
func names(msg, hint string) bool {
	_, rest, ok := strings.Cut(hint, "`")
	if !ok {
		return false
	}
	quoted, _, ok := strings.Cut(rest, "`")
	if !ok {
		return false
	}
	var words []string
	for _, w := range strings.Fields(quoted) {
		if w == strings.ToUpper(w) && w != strings.ToLower(w) {
			break
		}
		words = append(words, w)
	}
	return len(words) > 1 && strings.Contains(msg, strings.Join(words, " ")+" ")
}

// isUnreachable reports whether err is a failure to connect to the
// service at all (refused, no route, unknown host), as opposed to a
// failure during a call.
func isUnreachable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// dialCause is the innermost useful part of a connect failure ("connection
// refused", "no such host"), without the request that failed.
func dialCause(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
