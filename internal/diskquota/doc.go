// Package diskquota gives a sandbox a workspace of bounded size that holds
// under every runtime: a sparse image file holding an ext4 filesystem,
// attached to a loop device (auto-cleared on unmount) and mounted nosuid,
// nodev on the host directory the sandbox's container bind-mounts. Writes
// beyond the size fail inside the sandbox with ENOSPC; the host's disk only
// ever gives the image's size.
//
// It owns images and mounts below one root directory (the service's
// sandboxes directory) and nothing else: it never unmounts or detaches what
// lies outside that root. It must not import control, store or driver.
package diskquota
