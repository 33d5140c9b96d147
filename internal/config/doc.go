// Package config loads the service configuration: embedded defaults (the six
// built-in runtime profiles, limits, intervals) overlaid by an optional YAML
// file, then flags and environment (applied by cmd/sandbox-service). Load
// validates everything and names the offending key on error.
package config
