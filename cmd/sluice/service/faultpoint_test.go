package service

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/app/dispatch"
)

func TestTestHaltIsOffUnlessSetAndRefusesAnUnknownPoint(t *testing.T) {
	if halt, err := testHalt(); halt != nil || err != nil {
		t.Fatalf("unset: halt %v, %v; want none", halt != nil, err)
	}
	t.Setenv(TestHaltEnv, "nowhere")
	if _, err := testHalt(); err == nil || !strings.Contains(err.Error(), TestHaltEnv) {
		t.Fatalf("unknown point: %v, want an error naming %s", err, TestHaltEnv)
	}
	t.Setenv(TestHaltEnv, string(dispatch.FaultAfterStart))
	halt, err := testHalt()
	if err != nil || halt == nil {
		t.Fatalf("%s: halt %v, %v; want one", dispatch.FaultAfterStart, halt != nil, err)
	}
	halt(dispatch.FaultAfterClaim) // another point: returns at once
}
