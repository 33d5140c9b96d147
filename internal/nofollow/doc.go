// Package nofollow reaches host paths whose last component a sandbox
// controls (its agent's socket and the files beside it in the run
// directory, which the sandbox user owns) without following what the
// sandbox put there: a symlink to another sandbox's socket, or to a host
// file, is refused instead of followed. The directories above the last
// component must be the service's own (root-owned, not writable by any
// sandbox).
//
// It imports only errdefs and the standard library (and x/sys/unix).
package nofollow
