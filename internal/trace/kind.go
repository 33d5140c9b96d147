package trace

// Kind is the kind of an event: what happened, as "<area>.<what>". The
// kinds the service records are the constants below; a caller may post
// KindAnnotation and KindTaskStatus (CallerKind).
type Kind string

// The kinds of events the service records, by producer.
const (
	// Jobs (package jobs): a job started by the agent, and its end.
	KindJobStarted  Kind = "job.started"
	KindJobFinished Kind = "job.finished"

	// The browser (package browser).
	KindBrowserActionStarted  Kind = "browser.action.started"
	KindBrowserActionFinished Kind = "browser.action.finished"
	KindBrowserNavigation     Kind = "browser.navigation"
	KindBrowserScreenshot     Kind = "browser.screenshot"
	KindBrowserDownload       Kind = "browser.download"

	// The desktop (package desktop).
	KindComputerActionStarted  Kind = "computer.action.started"
	KindComputerActionFinished Kind = "computer.action.finished"
	KindComputerScreenshot     Kind = "computer.screenshot"
	// Control of a desktop: taken, released, requested by the agent; a
	// person's input through the live view.
	KindControlTaken     Kind = "control.taken"
	KindControlReleased  Kind = "control.released"
	KindControlRequested Kind = "control.requested"
	KindHumanInput       Kind = "human.input"

	// Video recordings (package recording).
	KindVideoStarted Kind = "video.started"
	KindVideoStopped Kind = "video.stopped"
	KindVideoSegment Kind = "video.segment"

	// Interrupts (this package): the caller's pause, resume, step and
	// abort; a step let through; an agent action refused while paused or
	// aborted.
	KindInterruptPause   Kind = "interrupt.pause"
	KindInterruptResume  Kind = "interrupt.resume"
	KindInterruptStep    Kind = "interrupt.step"
	KindInterruptAbort   Kind = "interrupt.abort"
	KindInterruptStepped Kind = "interrupt.stepped"
	KindActionRefused    Kind = "action.refused"

	// MCP servers (package mcp/servers): a tool call through the proxy.
	KindMCPToolCall Kind = "mcp.tool_call"

	// Workspaces (package changes): a patch applied.
	KindFilesPatched Kind = "files.patched"

	// Snapshots (package snapshots).
	KindSandboxPaused     Kind = "sandbox.paused"
	KindSandboxResumed    Kind = "sandbox.resumed"
	KindSnapshotTaken     Kind = "snapshot.taken"
	KindSandboxHibernated Kind = "sandbox.hibernated"
	KindSandboxWoken      Kind = "sandbox.woken"
	KindSandboxRolledBack Kind = "sandbox.rolled_back"
	KindSandboxForked     Kind = "sandbox.forked"

	// The caller's own (POST /v1/sandboxes/{id}/trace/events).
	KindAnnotation Kind = "annotation"
	KindTaskStatus Kind = "task.status"
)

// CallerKind reports whether a caller may post an event of kind k.
func CallerKind(k Kind) bool { return k == KindAnnotation || k == KindTaskStatus }
