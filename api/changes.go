package api

// Diff is what changed in a sandbox's workspace since a base
// (docs/diff-patch.md).
type Diff struct {
	// Base is what the workspace was compared with: "creation" (with the
	// snapshot it names), a snapshot or a sandbox id.
	Base    string      `json:"base"`
	Files   []DiffFile  `json:"files"`
	Summary DiffSummary `json:"summary"`
	// Truncated says files were left out or shown without lines;
	// TruncatedReason says which.
	Truncated       bool   `json:"truncated"`
	TruncatedReason string `json:"truncated_reason,omitempty"`
}

// DiffFile is one changed file: Status is added, modified, deleted or
// mode_changed; Diff its part of the git-format unified diff (empty for
// binary and too-large files).
type DiffFile struct {
	Path      string `json:"path"`
	Status    string `json:"status"`
	OldMode   string `json:"old_mode,omitempty"`
	NewMode   string `json:"new_mode,omitempty"`
	OldSize   int64  `json:"old_size"`
	NewSize   int64  `json:"new_size"`
	Binary    bool   `json:"binary,omitempty"`
	TooLarge  bool   `json:"too_large,omitempty"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Diff      string `json:"diff,omitempty"`
}

// DiffSummary counts every changed file, listed or not.
type DiffSummary struct {
	Files       int `json:"files"`
	Added       int `json:"added"`
	Modified    int `json:"modified"`
	Deleted     int `json:"deleted"`
	ModeChanged int `json:"mode_changed"`
	Additions   int `json:"additions"`
	Deletions   int `json:"deletions"`
}

// PatchRequest is the JSON form of a patch's body (the body may also be
// the patch itself, as text/x-patch).
type PatchRequest struct {
	Patch  string `json:"patch"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// PatchResult says what a patch changed, or would for a dry run.
type PatchResult struct {
	Applied bool          `json:"applied"`
	DryRun  bool          `json:"dry_run"`
	Files   []PatchedFile `json:"files"`
}

// PatchedFile is one file a patch wrote or removed: Status is added,
// modified, deleted, mode_changed or renamed (From is where it was).
type PatchedFile struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	From   string `json:"from,omitempty"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode,omitempty"`
}
