// Package app holds Sluice's use cases: the API's commands and queries, the
// dispatcher that admits queue items into Temporal, and the execution
// engine's activities. It speaks to the outside only through ports and
// takes its rules from domain.
package app
