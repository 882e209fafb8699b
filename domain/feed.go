package domain

import "encoding/json"

// FeedEvent is one entry of the live event streams: a node that started or
// finished, a run that started or finished, a queue item that changed.
// Seq orders all events and is what Last-Event-ID names.
type FeedEvent struct {
	// Seq orders every event; a stream resumes after it.
	Seq int64
	// WorkspaceID is the workspace the event belongs to.
	WorkspaceID ID
	// ExecutionID is set for node and run events.
	ExecutionID *ID
	// Kind is node.started, node.finished, run.started, run.finished,
	// queue.insert, queue.update or queue.delete.
	Kind string
	// Data is the event's JSON, as the stream sends it.
	Data json.RawMessage
}

// EndsExecutionStream reports whether e is the last event of its
// execution's stream: its run finished.
func (e FeedEvent) EndsExecutionStream() bool { return e.Kind == "run.finished" }
