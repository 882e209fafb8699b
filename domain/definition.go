package domain

import "time"

// Definition is a workflow definition with its current version's graph.
type Definition struct {
	// ID names the definition; it stays the same across versions.
	ID ID
	// WorkspaceID owns the definition; no other workspace may read or run it.
	WorkspaceID ID
	// Name is the label its owners chose.
	Name string
	// CurrentVersion is the version new executions run.
	CurrentVersion int
	// Graph is the current version's DAG.
	Graph Graph
	// CreatedAt is when version 1 was stored.
	CreatedAt time.Time
	// UpdatedAt is when the current version was stored.
	UpdatedAt time.Time
}

// DefinitionVersion is one immutable graph of a definition. Executions run
// a version, so editing a definition never changes a run in flight.
type DefinitionVersion struct {
	// DefinitionID names the definition the version belongs to.
	DefinitionID ID
	// Version counts from 1.
	Version int
	// Graph is the version's DAG, valid when stored.
	Graph Graph
	// CreatedAt is when the version was stored.
	CreatedAt time.Time
}
