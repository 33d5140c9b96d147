// Package errdefs defines the small set of error classes used across Genesis
// Sandbox and the single table that maps them to HTTP status codes.
//
// Errors are created at their source with context and wrap one of the class
// sentinels with %w; callers test the class with errors.Is. Nothing branches
// on error strings. This package imports nothing from the project.
package errdefs
