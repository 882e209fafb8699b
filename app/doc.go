// Package app holds Sluice's use cases: the API's commands and queries, the
// dispatcher that admits queue items into Temporal, and the worker's use
// cases (Runs: what a run records, and what its end does to its queue
// item), which the engine's Temporal activities call. It applies every
// per-item queue transition itself, through the stores' update closures,
// and an adapter only persists the state app computed; the set-based edges
// alone are SQL (see domain). It speaks to the outside only through ports
// and takes its rules from domain.
package app
