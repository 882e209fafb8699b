package porttest

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
)

// JSONLog collects what a slog JSON handler writes, from any goroutine, so
// a test can assert the log lines a use case or adapter promises:
// slog.New(slog.NewJSONHandler(&log, nil)).
type JSONLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *JSONLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Records returns the logged records whose msg is msg, in order.
func (l *JSONLog) Records(t testing.TB, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, raw := range bytes.Split(bytes.TrimSpace(l.buf.Bytes()), []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// Record returns the one logged record whose msg is msg, and fails the
// test unless there is exactly one.
func (l *JSONLog) Record(t testing.TB, msg string) map[string]any {
	t.Helper()
	recs := l.Records(t, msg)
	if len(recs) != 1 {
		t.Fatalf("%d %q log lines, want 1", len(recs), msg)
	}
	return recs[0]
}
