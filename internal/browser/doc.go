// Package browser serves the browser of a browser profile's sandbox
// (config.BrowserSpec): Chromium's DevTools protocol (CDP) and the
// Playwright protocol through the service, and an actions API that drives
// the page from the service side. The sandbox itself stays offline: every
// byte goes through its agent's port dial, as the port proxy's do.
//
// The action vocabulary is one table (table.go: each type's check,
// handler, trace screenshots and redaction); the recorder runs as a
// helper job of jobs, and readiness is jobs' one wait (Config.Ready).
//
// browser is a workload package: it reaches sandboxes through control's
// Attach (and the ports package's attacher and links), records through
// trace and recording, and takes its actions as api.BrowserAction. It
// imports no API handler, SDK, store or driver implementation (only the
// driver contract's image label constant).
package browser
