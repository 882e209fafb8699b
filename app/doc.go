// Package app is the map of Sluice's use cases, one package per role, so
// a reader opens one role at a time:
//
//   - app/usecases: the API's commands and queries;
//   - app/dispatch: the dispatcher, the claim loop that admits queue
//     items into Temporal, with its planner, lease and breaker;
//   - app/maintenance: the background jobs, each under its own lease;
//   - app/worker: what the engine's Temporal activities call (Runs);
//   - app/queue: what every role shares about a queue item, so no role
//     imports another for it.
//
// Every role applies each per-item queue transition itself, through the
// stores' update closures, and an adapter only persists the state app
// computed; the set-based edges alone are SQL (see domain). Each speaks to
// the outside only through ports and takes its rules from domain.
package app
