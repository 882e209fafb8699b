package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/e2e/harness"
)

// recordingTB stands in for the test the checking transport reports to,
// so that its verdicts can be checked.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// canned answers every request with one response.
type canned struct {
	status      int
	contentType string
	body        string
}

func (c canned) RoundTrip(*http.Request) (*http.Response, error) {
	h := http.Header{}
	if c.contentType != "" {
		h.Set("Content-Type", c.contentType)
	}
	return &http.Response{StatusCode: c.status, Header: h, Body: io.NopCloser(strings.NewReader(c.body))}, nil
}

// TestCheckerCatchesBreaches shows that the contract check is not vacuous:
// responses that break openapi.yaml, 5xx answers and 4xx answers that are
// not problems are all reported, and a conforming response is not.
func TestCheckerCatchesBreaches(t *testing.T) {
	t.Parallel()
	c := harness.NewContract(t)
	const ws = "6f1c1c51-3c6b-4a5b-9b8e-0f1d2a3b4c5d"
	workspace := `{"id":"` + ws + `","name":"Acme","plan":"PRO","limit":5,"active":0,"queued":0,"failedLastHour":0,` +
		`"createdAt":"2026-11-21T10:00:00Z","updatedAt":"2026-11-21T10:00:00Z"}`
	problem := `{"type":"https://sluice.dev/problems/not-found","title":"Not found","status":404,"detail":"no"}`
	tests := []struct {
		name   string
		path   string
		answer canned
		want   string // a fragment of the reported error; "" for none
	}{
		{"conforming", "/api/v1/workspaces/" + ws, canned{200, "application/json", workspace}, ""},
		{"conforming problem", "/api/v1/workspaces/" + ws, canned{404, "application/problem+json", problem}, ""},
		{"missing field", "/api/v1/workspaces/" + ws, canned{200, "application/json", strings.Replace(workspace, `"limit":5,`, "", 1)}, "breaks openapi.yaml"},
		{"wrong enum", "/api/v1/workspaces/" + ws, canned{200, "application/json", strings.Replace(workspace, "PRO", "GOLD", 1)}, "breaks openapi.yaml"},
		{"not a uuid", "/api/v1/workspaces/" + ws, canned{200, "application/json", strings.Replace(workspace, ws, "acme", 1)}, "breaks openapi.yaml"},
		{"not a date-time", "/api/v1/workspaces/" + ws, canned{200, "application/json", strings.Replace(workspace, "2026-11-21T10:00:00Z", "yesterday", 1)}, "breaks openapi.yaml"},
		{"undocumented status", "/api/v1/workspaces/" + ws, canned{409, "application/problem+json", strings.Replace(problem, "404", "409", 1)}, "status is not supported"},
		{"wrong content type", "/api/v1/workspaces/" + ws, canned{200, "text/plain", workspace}, "breaks openapi.yaml"},
		{"server error", "/api/v1/workspaces/" + ws, canned{500, "application/problem+json", strings.Replace(problem, "404", "500", 1)}, "answered 500"},
		{"4xx not a problem", "/api/v1/workspaces/" + ws, canned{404, "application/json", `{"error":"no"}`}, "want application/problem+json"},
		{"problem without detail", "/api/v1/workspaces/" + ws, canned{404, "application/problem+json", strings.Replace(problem, `,"detail":"no"`, "", 1)}, "incomplete problem"},
		{"no such operation", "/api/v1/elsewhere", canned{200, "application/json", `{}`}, "no operation in openapi.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingTB{TB: t}
			client := &http.Client{Transport: &harness.CheckingTransport{T: rec, Contract: c, Next: tt.answer}}
			resp, err := client.Get("http://sluice.test" + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Equal(body, []byte(tt.answer.body)) {
				t.Errorf("the transport changed the body: %s", body)
			}
			joined := strings.Join(rec.errors, "\n")
			switch {
			case tt.want == "" && len(rec.errors) > 0:
				t.Errorf("a conforming response was reported:\n%s", joined)
			case tt.want != "" && !strings.Contains(joined, tt.want):
				t.Errorf("reported %q, want a report containing %q", joined, tt.want)
			}
		})
	}
}
