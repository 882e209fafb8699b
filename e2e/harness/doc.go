// Package harness is what the end-to-end suites under e2e/ share: the
// in-process API stack checked against the spec (api.go), a whole sluice
// started in the test process through the binary's own fx modules
// (sluice.go) and the helpers that drive runs through its API (run.go,
// nodes.go), the sluice binary built and spawned as separate role
// processes (process.go, roles.go), and small fixtures. It imports
// testing and is imported by tests only.
//
// Each suite needs the real stack: DATABASE_URL and TEMPORAL_ADDRESS, as
// bin/devstack sets them (`make test`). Without them RequireEnv skips the
// test, unless SLUICE_REQUIRE_INTEGRATION is set, when it fails.
package harness
