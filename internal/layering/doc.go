// Package layering holds no code: its test freezes the import rules that
// the packages' doc.go files state (docs/architecture.md draws them), so
// that an upward import fails the build's tests instead of drifting in.
package layering
