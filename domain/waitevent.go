package domain

import (
	"encoding/json"
	"strconv"
	"time"
)

// NodeWaitForEvent waits, durably and holding no worker slot, for a named
// event sent to its execution through the API (WaitForEventConfig). The
// event's payload is its output; edges leaving it may carry "when": true
// (the event came) or false (the wait timed out).
const NodeWaitForEvent NodeType = "WAIT_FOR_EVENT"

// MaxEventWait bounds a WAIT_FOR_EVENT's timeout, as MaxDelay bounds a
// DELAY: a run waiting holds its workspace's concurrency slot.
const MaxEventWait = MaxDelay

// MaxEventNameLength bounds event names, which appear in API bodies,
// Temporal signal names and log lines.
const MaxEventNameLength = 100

// WaitForEventConfig configures a WAIT_FOR_EVENT node.
type WaitForEventConfig struct {
	// Event is the name the event is sent under; letters, digits, '_' and
	// '-', unique among the graph's WAIT_FOR_EVENT nodes.
	Event string `json:"event"`
	// Timeout ends the wait when set (at most MaxEventWait): the node then
	// takes its "when": false edges, or fails when it has none. Zero waits
	// as long as the run lives.
	Timeout Duration `json:"timeout,omitempty"`
}

// DecodeWaitForEventConfig reads and checks a WAIT_FOR_EVENT config
// strictly; see DecodeHTTPRequestConfig for the error form.
func DecodeWaitForEventConfig(raw json.RawMessage) (WaitForEventConfig, error) {
	return decodeStrict(raw, decodeWaitForEventConfig)
}

// decodeWaitForEventConfig decodes and checks, reporting problems under path.
func decodeWaitForEventConfig(raw json.RawMessage, path string, ve *ValidationError) WaitForEventConfig {
	f := configFields(raw, path, ve, []string{"event", "timeout"})
	if f == nil {
		return WaitForEventConfig{}
	}
	var c WaitForEventConfig
	if v, ok := present(f, "event"); !ok {
		ve.add(path+"/event", "required")
	} else if s, ok := stringField(v, path+"/event", ve); ok {
		if err := CheckEventName(s); err != "" {
			ve.add(path+"/event", "%s", err)
		} else {
			c.Event = s
		}
	}
	if v, ok := present(f, "timeout"); ok {
		d, err := parseDuration(v)
		switch {
		case err != nil:
			ve.add(path+"/timeout", "%s", err.Error())
		case d < 0:
			ve.add(path+"/timeout", "must not be negative")
		case d.Std() > MaxEventWait:
			ve.add(path+"/timeout", "%s is longer than the maximum of %s", d, time.Duration(MaxEventWait))
		default:
			c.Timeout = d
		}
	}
	return c
}

// CheckEventName returns what is wrong with an event name, "" if nothing.
func CheckEventName(name string) string {
	switch {
	case name == "":
		return "an event name is required"
	case len(name) > MaxEventNameLength:
		return "an event name is at most 100 bytes"
	case !validKey(name):
		return "an event name may only contain letters, digits, '_' and '-'"
	}
	return ""
}

// WaitsForEvent returns the key of g's WAIT_FOR_EVENT node waiting for
// event name, and false when there is none.
func (g Graph) WaitsForEvent(name string) (string, bool) {
	for _, n := range g.Nodes {
		if n.Type != NodeWaitForEvent {
			continue
		}
		if c, err := DecodeWaitForEventConfig(n.Config); err == nil && c.Event == name {
			return n.Key, true
		}
	}
	return "", false
}

// HasBranch reports whether an edge leaving key is taken only on branch
// (its When equals branch).
func (g Graph) HasBranch(key string, branch bool) bool {
	for _, e := range g.Edges {
		if e.From == key && e.When != nil && *e.When == branch {
			return true
		}
	}
	return false
}

// checkEventNames reports a WAIT_FOR_EVENT whose event name an earlier one
// already waits for: an event is sent to one node.
func checkEventNames(g Graph, ve *ValidationError) {
	first := map[string]int{}
	for i, n := range g.Nodes {
		if n.Type != NodeWaitForEvent {
			continue
		}
		c, err := DecodeWaitForEventConfig(n.Config)
		if err != nil {
			continue
		}
		if at, dup := first[c.Event]; dup {
			ve.add("/nodes/"+strconv.Itoa(i)+"/config/event", "event %q is already waited for by /nodes/%d: an event goes to one node", c.Event, at)
			continue
		}
		first[c.Event] = i
	}
}
