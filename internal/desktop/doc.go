// Package desktop serves the visual desktop of a desktop profile's sandbox
// (config.DesktopSpec): the computer actions API (screenshots, mouse,
// keyboard, windows, launching programs) in the Anthropic computer tool's
// and OpenAI computer-use vocabularies, with coordinates in a declared
// logical display size scaled to the real one both ways.
//
// The service is an X11 client of the sandbox's X server (Xtigervnc): it
// speaks the X protocol (github.com/jezek/xgb) over the agent's port dial
// to the server's loopback TCP port, injects input with the XTEST
// extension and reads the screen with GetImage. The sandbox stays
// offline; no process is spawned per action.
//
// The action vocabulary, aliases included, is one table (table.go: each
// action's parse, run and how the trace treats it). A launched program
// and the recorder are helper jobs of jobs (Helpers: real job ids), and
// the X and VNC servers' readiness is jobs' one wait (Config.Ready).
//
// desktop is a workload package: it reaches sandboxes through control's
// Attach and hooks only; it imports no API, store or driver package.
package desktop
