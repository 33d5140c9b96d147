package agentproto

// PathReset is POST: wipe the sandbox for its next holder (see ResetResult).
const PathReset = "/v1/reset"

// ResetResult is the answer of a successful POST /v1/reset: every process
// other than the agent was killed, the agent forgot its jobs and terminals,
// and every writable place was emptied. A reset that leaves anything behind
// fails instead (code reset_incomplete) and the sandbox must be destroyed.
type ResetResult struct {
	// Killed counts the processes killed (jobs, terminals and strays).
	Killed int `json:"killed"`
	// JobsDropped and TerminalsDropped count the records forgotten.
	JobsDropped      int `json:"jobs_dropped"`
	TerminalsDropped int `json:"terminals_dropped"`
	// Removed counts the files, directories and other entries deleted.
	Removed int `json:"removed"`
	// Emptied lists the directories that were emptied (all now empty).
	Emptied []string `json:"emptied"`
	// RootScanned is true when the writable root file system was searched
	// for entries of the sandbox user.
	RootScanned bool  `json:"root_scanned"`
	DurationMS  int64 `json:"duration_ms"`
}
