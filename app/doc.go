// Package app holds Sluice's use cases: the API's commands and queries.
// The dispatcher that admits queue items into Temporal is in app/dispatch,
// the background jobs in app/maintenance, the worker's use cases in
// app/worker, and what every role shares about a queue item in app/queue.
// It applies every
// per-item queue transition itself, through the stores' update closures,
// and an adapter only persists the state app computed; the set-based edges
// alone are SQL (see domain). It speaks to the outside only through ports
// and takes its rules from domain.
package app
