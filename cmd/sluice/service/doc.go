// Package service composes Sluice's roles: the configuration read from the
// environment (LoadConfig, with every variable declared in configVars), the
// fx modules of each role (CommonModule, APIModule, DispatcherModule,
// WorkerModule), Run, which runs one command, and the fault suite's halt
// point. cmd/sluice is its thin main; the end-to-end suites under e2e/
// start the same modules in their own process.
package service
