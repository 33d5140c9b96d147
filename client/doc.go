// Package client is the public Go SDK of the Genesis Sandbox HTTP API v1.
// The genesis CLI is built on it. It imports nothing from internal/.
package client
