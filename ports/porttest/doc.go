// Package porttest holds what the tests of every layer share: the contract
// suites of the store ports, one per port, run against every implementation
// (the Postgres store, and the in-memory store the engine's tests use), so a
// fake that tests trust keeps the same rules as the real thing; and
// Eventually, the one way a test waits for a state that something else
// brings about.
package porttest
