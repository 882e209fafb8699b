package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/e2e/harness"
)

// sseEvent is one Server-Sent Event as a client parses it.
type sseEvent struct {
	ID    int64
	Event string
	Data  map[string]any
}

// openStream opens an event stream with Last-Event-ID after (none when 0)
// and returns its events as they come; the channel closes with the stream.
func openStream(ctx context.Context, t *testing.T, url string, after int64) <-chan sseEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+harness.TestAdminToken)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.Event != "" {
					select {
					case out <- e:
					case <-ctx.Done():
						return
					}
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				e.ID, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				e.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &e.Data)
			}
		}
	}()
	return out
}

// TestAnExecutionsStreamSendsNodeAndRunEventsInOrderAndResumes: a run of
// three nodes (a transform, a one-second delay, a transform) streamed
// from its start sends run.started first, each node's records in the
// graph's order (a started one before its finished), and run.finished
// last, with rising ids, then ends; a client that drops after two events and
// reconnects with Last-Event-ID gets exactly the rest.
//
// The server's write timeout is half a second here: a stream outlives it.
func TestAnExecutionsStreamSendsNodeAndRunEventsInOrderAndResumes(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{"SLUICE_HTTP_WRITE_TIMEOUT": "500ms"})
	e := harness.NewE2E(t, base)
	graph := map[string]any{
		"nodes": []any{
			harness.Node("a", "TRANSFORM", map[string]any{"output": map[string]any{"x": 1}}),
			harness.Node("wait", "DELAY", map[string]any{"duration": "1s"}),
			harness.Node("b", "TRANSFORM", map[string]any{"output": map[string]any{"y": 2}}),
		},
		"edges": []any{harness.Edge("a", "wait"), harness.Edge("wait", "b")},
	}
	exec := e.StartIn(graph, nil)
	url := base + "/api/v1/workflow/executions/" + exec + "/events"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A client that reads two events and drops the connection.
	firstCtx, drop := context.WithCancel(ctx)
	var first []sseEvent
	for ev := range openStream(firstCtx, t, url, 0) {
		first = append(first, ev)
		if len(first) == 2 {
			break
		}
	}
	drop()
	if len(first) != 2 {
		t.Fatalf("first connection got %d events", len(first))
	}
	// It reconnects with the last id it got and reads to the end.
	resumed := append([]sseEvent(nil), first...)
	for ev := range openStream(ctx, t, url, first[1].ID) {
		resumed = append(resumed, ev)
	}
	// A client that read it whole, from the start, after the run.
	var whole []sseEvent
	for ev := range openStream(ctx, t, url, 0) {
		whole = append(whole, ev)
	}

	describe := func(evs []sseEvent) string {
		var b strings.Builder
		for _, ev := range evs {
			b.WriteString(strconv.FormatInt(ev.ID, 10) + ":" + ev.Event)
			if k, ok := ev.Data["key"].(string); ok {
				b.WriteString("(" + k + ")")
			}
			b.WriteString(" ")
		}
		return b.String()
	}
	t.Logf("resumed: %s", describe(resumed))
	if describe(resumed) != describe(whole) {
		t.Fatalf("a reconnect with Last-Event-ID differs from the whole stream:\nresumed %s\nwhole   %s", describe(resumed), describe(whole))
	}
	var kinds []string
	for i, ev := range whole {
		if i > 0 && ev.ID <= whole[i-1].ID {
			t.Errorf("ids do not rise: %s", describe(whole))
		}
		if ev.Data["executionId"] != exec {
			t.Errorf("event %d is of execution %v", ev.ID, ev.Data["executionId"])
		}
		k := ev.Event
		if key, ok := ev.Data["key"].(string); ok {
			k += "(" + key + ")"
		}
		kinds = append(kinds, k)
	}
	// Pure nodes (TRANSFORM) are recorded once, when they finish; a DELAY
	// is recorded as started when its timer starts, after the ends of the
	// nodes it waited on (TestAnExecutionsStreamTellsEachNodeAfterTheNodesItWaitsOn).
	if kinds[0] != "run.started" || kinds[len(kinds)-1] != "run.finished" {
		t.Fatalf("events %v: want run.started first and run.finished last", kinds)
	}
	pos := map[string]int{}
	for i, k := range kinds {
		if _, dup := pos[k]; dup {
			t.Fatalf("events %v: %s twice", kinds, k)
		}
		pos[k] = i
	}
	for _, n := range []string{"a", "wait", "b"} {
		if _, ok := pos["node.finished("+n+")"]; !ok {
			t.Fatalf("events %v: no node.finished(%s)", kinds, n)
		}
		if st, ok := pos["node.started("+n+")"]; ok && st > pos["node.finished("+n+")"] {
			t.Fatalf("events %v: %s finished before it started", kinds, n)
		}
	}
	if _, ok := pos["node.started(wait)"]; !ok {
		t.Fatalf("events %v: the delay's start (its timer) is missing", kinds)
	}
	if !(pos["node.finished(a)"] < pos["node.finished(wait)"] && pos["node.finished(wait)"] < pos["node.finished(b)"]) {
		t.Fatalf("events %v: the nodes did not finish in the graph's order", kinds)
	}
	if whole[len(whole)-1].Data["status"] != "COMPLETED" {
		t.Fatalf("run.finished says %v", whole[len(whole)-1].Data)
	}
}
