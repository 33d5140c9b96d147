package driver

import "context"

// Optional interfaces of a Driver that keep a sandbox's state. Each is
// reported per runtime by the probe (RuntimeFeatures); where a runtime
// lacks one the service answers 501 with the probe's reason.

// Pauser freezes and thaws a container's processes; a paused container
// keeps its memory and runs nothing. Pausing a paused container, or
// unpausing a running one, succeeds.
type Pauser interface {
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
}

// CheckpointOptions say where and how a container's state is saved.
type CheckpointOptions struct {
	// ImagePath is the directory the state is written to; it must exist
	// and be empty.
	ImagePath string
	// LeaveRunning keeps the container as it was (running, or paused);
	// without it the container stops once saved.
	LeaveRunning bool
}

// Checkpointer saves the whole state of a container (processes, memory,
// its root filesystem's in-sandbox changes) to a directory that
// Spec.Restore brings back in a new container. Before a save the
// sandbox's agent must close its socket (agentproto.PathCheckpointPrepare).
type Checkpointer interface {
	Checkpoint(ctx context.Context, id string, o CheckpointOptions) error
}

// RootfsSaver saves the changes a container made to its root filesystem:
// as an image (CommitRootfs: runc, whose writable layer is the daemon's)
// or as a tar that Spec.Restore lays over the image (SaveRootfsUpper:
// runsc, whose changes stay inside the sandbox).
type RootfsSaver interface {
	// CommitRootfs makes image ref of the container's current files,
	// pausing it for the copy, and returns the size of the layer it added
	// (what the image takes beyond the container's own image); RemoveImage
	// removes such an image.
	// RemoveImage answers an error of class errdefs.ErrConflict, and keeps
	// the image, while a container (running or not) was made from it.
	CommitRootfs(ctx context.Context, id, ref string, labels map[string]string) (int64, error)
	RemoveImage(ctx context.Context, ref string) error
	// SavedImages lists the images made by CommitRootfs that carry every
	// label of labels ("key=value"), dangling ones included.
	SavedImages(ctx context.Context, labels ...string) ([]SavedImage, error)
	// SaveRootfsUpper writes a tar of the root filesystem's changes of a
	// runsc container to path.
	SaveRootfsUpper(ctx context.Context, id, path string) error
}

// SavedImage is an image CommitRootfs made: its id, the references
// that still name it (none when it is dangling, and for a moment while
// the daemon commits it: it tags an image only after making it) and its
// labels.
type SavedImage struct {
	ID     string
	Refs   []string
	Labels map[string]string
}
