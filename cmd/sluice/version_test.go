package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestVersionNamesTheBuildsVersionAndRevision(t *testing.T) {
	var out strings.Builder
	printVersion(&out)
	if !regexp.MustCompile(`^sluice \S+ \(revision \S+\)\n$`).MatchString(out.String()) {
		t.Errorf("sluice version printed %q, want `sluice <version> (revision <revision>)`", out.String())
	}
	version, revision = "v1.2.3", "0123abc"
	t.Cleanup(func() { version, revision = "", "" })
	out.Reset()
	printVersion(&out)
	if out.String() != "sluice v1.2.3 (revision 0123abc)\n" {
		t.Errorf("with link-time values, sluice version printed %q", out.String())
	}
}
