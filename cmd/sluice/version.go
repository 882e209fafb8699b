package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version and revision name the build. `make image` and `make build` set
// them at link time (-X main.version=… -X main.revision=…), since a build
// from a source archive or with -buildvcs=false records no VCS revision;
// when unset they come from the build information the go command records.
var version, revision string

// buildVersion returns the build's version and revision, never empty.
func buildVersion() (string, string) {
	v, rev := version, revision
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && rev == "" {
				rev = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if rev == "" {
		rev = "unknown"
	}
	return v, rev
}

// printVersion writes `sluice version`'s answer.
func printVersion(w io.Writer) {
	v, rev := buildVersion()
	fmt.Fprintf(w, "sluice %s (revision %s)\n", v, rev)
}
