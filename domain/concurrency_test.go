package domain

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChooseKeyedHoldsEachKeysLimitAndTakesTurns(t *testing.T) {
	t.Parallel()
	ids := make([]ID, 8)
	for i := range ids {
		ids[i][0] = byte(i + 1)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	oneLeft := &RateBucket{Rate: StartRate{Rate: 1, Per: PerSecond, Burst: 1}}
	noneLeft := &RateBucket{Rate: StartRate{Rate: 1, Per: PerSecond, Burst: 1}, TAT: now.Add(time.Second)}
	tests := []struct {
		name       string
		candidates []KeyedCandidate
		quota      int
		want       []ID
	}{
		{"a full key is skipped, the next key goes", []KeyedCandidate{
			{ID: ids[0], Key: "a", Limit: 2, Running: 2}, {ID: ids[1], Key: "a", Limit: 2, Running: 2}, {ID: ids[2], Key: "b", Limit: 1},
		}, 5, []ID{ids[2]}},
		{"a key gets no more than its free slots in one batch", []KeyedCandidate{
			{ID: ids[0], Key: "a", Limit: 3, Running: 1}, {ID: ids[1], Key: "a", Limit: 3, Running: 1}, {ID: ids[2], Key: "a", Limit: 3, Running: 1},
		}, 5, []ID{ids[0], ids[1]}},
		{"keys take turns: one of each before a second of any", []KeyedCandidate{
			{ID: ids[0], Key: "a", Limit: 5}, {ID: ids[1], Key: "a", Limit: 5}, {ID: ids[2], Key: "a", Limit: 5}, {ID: ids[3], Key: "b", Limit: 5}, {ID: ids[4], Key: "c", Limit: 5},
		}, 4, []ID{ids[0], ids[3], ids[4], ids[1]}},
		{"items without a key are turns of their own", []KeyedCandidate{
			{ID: ids[0], Key: "a", Limit: 5}, {ID: ids[1], Key: "a", Limit: 5}, {ID: ids[2]}, {ID: ids[3]},
		}, 3, []ID{ids[0], ids[2], ids[3]}},
		{"the quota bounds the batch", []KeyedCandidate{{ID: ids[0]}, {ID: ids[1]}}, 1, []ID{ids[0]}},
		{"a rated key takes no more than its rate allows, and the next key goes", []KeyedCandidate{
			{ID: ids[0], Key: "a", Limit: 5, Rate: oneLeft}, {ID: ids[1], Key: "a", Limit: 5, Rate: oneLeft},
			{ID: ids[2], Key: "b", Limit: 5}, {ID: ids[3], Key: "b", Limit: 5},
		}, 5, []ID{ids[0], ids[2], ids[3]}},
		{"a rated key whose rate allows none is passed over", []KeyedCandidate{
			{ID: ids[0], Key: "a", Limit: 5, Rate: noneLeft}, {ID: ids[1], Key: "b", Limit: 5},
		}, 5, []ID{ids[1]}},
		{"an item not yet due takes no turn of its key", []KeyedCandidate{
			{ID: ids[0], Key: "a", Limit: 5, AvailableAt: now.Add(time.Minute)}, {ID: ids[1], Key: "a", Limit: 5}, {ID: ids[2], Key: "b", Limit: 5},
		}, 2, []ID{ids[1], ids[2]}},
		{"a full workspace takes nothing", []KeyedCandidate{{ID: ids[0]}}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, _ := ChooseKeyed(WorkspaceFigures{Limit: 10}, tt.candidates, tt.quota, now); !slices.Equal(got, tt.want) {
				t.Fatalf("ChooseKeyed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConcurrencyKeyIsResolvedOverTheInputOrRefusedNamingIt(t *testing.T) {
	t.Parallel()
	c := Concurrency{Key: "customer-{{ input.customer.id }}", Limit: 2}
	key, err := c.ResolveKey(json.RawMessage(`{"customer": {"id": 42}}`))
	if err != nil || key != "customer-42" {
		t.Fatalf("ResolveKey = %q, %v; want customer-42", key, err)
	}
	var ie *InputError
	if _, err := c.ResolveKey(json.RawMessage(`{"customer": {}}`)); !errors.As(err, &ie) || ie.Problems[0].Path != "/input" || !strings.Contains(ie.Error(), "customer.id") {
		t.Fatalf("a missing path gave %v, want a problem at /input naming input.customer.id", err)
	}
	long := Concurrency{Key: "{{ input.s }}", Limit: 1}
	if _, err := long.ResolveKey(json.RawMessage(`{"s": "` + strings.Repeat("x", ConcurrencyKeyMax+1) + `"}`)); !errors.As(err, &ie) {
		t.Fatalf("a key past %d bytes gave %v, want a validation problem", ConcurrencyKeyMax, err)
	}
}

func TestAGraphsConcurrencyIsDecodedAndValidated(t *testing.T) {
	t.Parallel()
	g, err := DecodeGraph([]byte(`{"nodes": [], "edges": [], "concurrency": {"key": "{{ input.customer }}", "limit": 3}}`))
	if err != nil || g.Concurrency == nil || g.Concurrency.Limit != 3 || g.Validate() != nil {
		t.Fatalf("decoded %+v, %v", g.Concurrency, err)
	}
	for name, tt := range map[string]struct{ body, path string }{
		"template too long":    {`{"key": "{{ input.a }}` + strings.Repeat("x", ConcurrencyKeyTemplateMax) + `", "limit": 1}`, "/concurrency/key"},
		"no input reference":   {`{"key": "fixed", "limit": 1}`, "/concurrency/key"},
		"a step reference":     {`{"key": "{{ steps.a.output }}", "limit": 1}`, "/concurrency/key"},
		"limit zero":           {`{"key": "{{ input.a }}", "limit": 0}`, "/concurrency/limit"},
		"limit over the limit": {`{"key": "{{ input.a }}", "limit": 100001}`, "/concurrency/limit"},
		"unknown member":       {`{"key": "{{ input.a }}", "limit": 1, "rate": 5}`, "/concurrency/rate"},
	} {
		g, err := DecodeGraph([]byte(`{"nodes": [], "concurrency": ` + tt.body + `}`))
		if err == nil {
			err = g.Validate()
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || !slices.ContainsFunc(ve.Problems, func(p Problem) bool { return p.Path == tt.path }) {
			t.Errorf("%s: got %v, want a problem at %s", name, err, tt.path)
		}
	}
}

func TestWaitingOnSaysWhatHoldsAnItem(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	pending := func(key string, attempts int, at time.Time) QueueItem {
		return QueueItem{ConcurrencyKey: key, ConcurrencyLimit: 2, QueueState: QueueState{Status: QueuePending, AvailableAt: at, AttemptCount: attempts}}
	}
	room := WaitFigures{WorkspaceLimit: 5, WorkspaceRunning: 1, KeyRunning: map[string]int{"a": 2, "b": 1}}
	full := WaitFigures{WorkspaceLimit: 5, WorkspaceRunning: 5, KeyRunning: map[string]int{"a": 2}}
	perSecond := &StartRate{Rate: 1, Per: PerSecond, Burst: 1}
	// A bucket whose TAT is a minute ahead (rate 1/s, burst 1) next lets a
	// start go in a minute.
	wsBucket := &RateBucket{Rate: *perSecond, TAT: later}
	wsRated := WaitFigures{WorkspaceLimit: 5, WorkspaceRunning: 1, WorkspaceRate: wsBucket}
	keyRated := pending("b", 0, now)
	keyRated.ConcurrencyRate = perSecond
	tests := []struct {
		name string
		item QueueItem
		f    WaitFigures
		want *Waiting
	}{
		{"next in line", pending("b", 0, now), room, nil},
		{"a full key", pending("a", 0, now), room, &Waiting{Reason: WaitKeyLimit, Limit: 2, Running: 2, Key: "a"}},
		{"a full workspace comes before its key", pending("a", 0, now), full, &Waiting{Reason: WaitWorkspaceLimit, Limit: 5, Running: 5}},
		{"a back-off comes first, with its end", pending("", 1, later), full, &Waiting{Reason: WaitBackOff, Until: &later}},
		{"a notBefore ahead comes first, with its time", pending("a", 0, later), full, &Waiting{Reason: WaitNotBefore, Until: &later}},
		{"a notBefore past waits on what is full", pending("", 0, now.Add(-time.Second)), full, &Waiting{Reason: WaitWorkspaceLimit, Limit: 5, Running: 5}},
		{"not PENDING waits on nothing", QueueItem{QueueState: QueueState{Status: QueueDispatched}}, full, nil},
		{"the workspace's rate, with when it next lets one go", pending("b", 0, now), wsRated, &Waiting{Reason: WaitStartRate, Until: &later}},
		{"a full workspace comes before its rate", pending("b", 0, now), WaitFigures{WorkspaceLimit: 5, WorkspaceRunning: 5, WorkspaceRate: wsBucket},
			&Waiting{Reason: WaitWorkspaceLimit, Limit: 5, Running: 5}},
		{"a workspace rate already due holds nothing", pending("b", 0, now), WaitFigures{WorkspaceLimit: 5, WorkspaceRate: &RateBucket{Rate: *perSecond, TAT: now}}, nil},
		{"the key's rate, with its key", keyRated, WaitFigures{WorkspaceLimit: 5, KeyRunning: map[string]int{"b": 1}, KeyTAT: map[string]time.Time{"b": later}},
			&Waiting{Reason: WaitStartRate, Key: "b", Until: &later}},
		{"a full key comes before its rate", keyRated, WaitFigures{WorkspaceLimit: 5, KeyRunning: map[string]int{"b": 2}, KeyTAT: map[string]time.Time{"b": later}},
			&Waiting{Reason: WaitKeyLimit, Limit: 2, Running: 2, Key: "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.item.WaitingOn(tt.f, now)
			if (got == nil) != (tt.want == nil) || got != nil && (got.Reason != tt.want.Reason || got.Limit != tt.want.Limit ||
				got.Running != tt.want.Running || got.Key != tt.want.Key || (got.Until == nil) != (tt.want.Until == nil)) {
				t.Fatalf("WaitingOn = %+v, want %+v", got, tt.want)
			}
		})
	}
}
