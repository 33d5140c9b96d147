// Package recording is what the trace keeps of a sandbox's screen: the
// screenshots around an agent's actions (a full image and a thumbnail,
// both artifacts) and video, recorded by ffmpeg inside the sandbox into
// short fragmented-MP4 segments that are kept as artifacts one by one and
// recorded as video.segment events with their wall-clock times.
//
// The desktop and the browser packages use it alike: the desktop records
// its X display (x11grab), the browser the frames Chromium's screencast
// sends, which it streams into the recorder's standard input.
//
// Import rule (internal/layering): recording is a leaf below the workload
// packages; it imports only trace, sandbox, errdefs and the agent's
// protocol types (the recorder runs an agent job through functions its
// caller gives it).
package recording
