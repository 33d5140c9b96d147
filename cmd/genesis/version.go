package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release version, set at link time with
// -ldflags "-X main.version=..." (the Makefile does); empty means use the
// binary's build information.
var version string

// versionInfo describes this build of the CLI.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// buildVersion returns the link-time version, else the module version when
// installed with go install, else "dev"; plus the VCS revision when the
// build recorded one.
func buildVersion() versionInfo {
	v := versionInfo{Version: "dev", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if version != "" {
		v.Version = version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if mv := info.Main.Version; version == "" && mv != "" && mv != "(devel)" {
		v.Version = mv
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// newVersionCmd builds "genesis version".
func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show the version of this CLI",
		Args:  exactArgs(0, "no arguments"),
		RunE: a.action(func(*cobra.Command, []string) error {
			v := buildVersion()
			if a.jsonOutput() {
				return printJSON(a.stdout, v)
			}
			rev := ""
			if v.Revision != "" {
				rev = " " + v.Revision
				if len(v.Revision) > 12 {
					rev = " " + v.Revision[:12]
				}
				if v.Modified {
					rev += "+dirty"
				}
			}
			_, err := fmt.Fprintf(a.stdout, "genesis %s%s %s %s\n", v.Version, rev, v.Go, v.Platform)
			return err
		}),
	}
}
