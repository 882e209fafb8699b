package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// respondTo runs the error mapper on err as if answering GET /v1/x, and
// returns the recorded response, its decoded problem and what was logged.
func respondTo(t *testing.T, err error) (*httptest.ResponseRecorder, api.Problem, string) {
	t.Helper()
	var logs bytes.Buffer
	rec := httptest.NewRecorder()
	errorResponder{log: slog.New(slog.NewTextHandler(&logs, nil))}.respond(rec, httptest.NewRequest(http.MethodGet, "/v1/x", nil), err)
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p api.Problem
	if decodeErr := json.Unmarshal(rec.Body.Bytes(), &p); decodeErr != nil {
		t.Fatalf("the body is not a problem document: %v: %s", decodeErr, rec.Body)
	}
	if p.Status != rec.Code {
		t.Fatalf("problem status %d, response status %d: they must agree", p.Status, rec.Code)
	}
	return rec, p, logs.String()
}

func TestErrorResponderMapsEachKindOfErrorToItsProblem(t *testing.T) {
	t.Parallel()
	twoProblems := &domain.ValidationError{Problems: []domain.Problem{
		{Path: "/graph/edge", Message: "unknown member"},
		{Path: "/graph/nodes/0/key", Message: "is empty"},
	}}
	twoFields := []api.FieldError{{Path: "/graph/edge", Message: "unknown member"}, {Path: "/graph/nodes/0/key", Message: "is empty"}}
	tests := []struct {
		name       string
		err        error
		status     int
		kind       string
		detail     string
		fields     []api.FieldError
		retryAfter string
	}{
		{
			name: "a graph's validation error lists every problem with its path", err: usecases.InvalidGraph(twoProblems),
			status: http.StatusUnprocessableEntity, kind: "invalid-graph", detail: "2 problems",
			fields: twoFields,
		},
		{
			name: "one problem is counted in the singular", err: usecases.InvalidGraph(&domain.ValidationError{Problems: []domain.Problem{{Path: "/graph", Message: "has a cycle"}}}),
			status: http.StatusUnprocessableEntity, kind: "invalid-graph", detail: "1 problem",
			fields: []api.FieldError{{Path: "/graph", Message: "has a cycle"}},
		},
		{
			name: "a wrapped validation error is still found", err: fmt.Errorf("saving: %w", usecases.InvalidGraph(twoProblems)),
			status: http.StatusUnprocessableEntity, kind: "invalid-graph", detail: "2 problems", fields: twoFields,
		},
		{
			name:   "a validation error of anything but a graph is a refused field, not an invalid graph",
			err:    &domain.ValidationError{Problems: []domain.Problem{{Path: "/requestsPerSecond", Message: "must be positive"}}},
			status: http.StatusUnprocessableEntity, kind: "invalid-field", detail: "1 problem",
			fields: []api.FieldError{{Path: "/requestsPerSecond", Message: "must be positive"}},
		},
		{
			name: "a quota with a wait rounds Retry-After up to whole seconds", err: &domain.QuotaError{Quota: "pending queue items", Limit: 2, RetryAfter: 1500 * time.Millisecond},
			status: http.StatusTooManyRequests, kind: "quota-exceeded", retryAfter: "2",
		},
		{
			name: "a quota on a field names the field", err: &domain.QuotaError{Quota: "nodes per graph", Limit: 3, Field: "/graph/nodes"},
			status: http.StatusTooManyRequests, kind: "quota-exceeded",
		},
		{
			name: "a body over the limit", err: &http.MaxBytesError{Limit: 10},
			status: http.StatusRequestEntityTooLarge, kind: "too-large",
		},
		{
			name: "no credential", err: fmt.Errorf("%w: missing bearer token", usecases.ErrUnauthenticated),
			status: http.StatusUnauthorized, kind: "unauthorized", detail: "unauthenticated: missing bearer token",
		},
		{
			name: "another workspace's resource", err: fmt.Errorf("%w: the workspace belongs to another workspace", usecases.ErrForbidden),
			status: http.StatusForbidden, kind: "forbidden", detail: "forbidden: the workspace belongs to another workspace",
		},
		{
			name: "a missing row", err: fmt.Errorf("definition: %w", ports.ErrNotFound),
			status: http.StatusNotFound, kind: "not-found", detail: "definition: not found",
		},
		{
			name: "an idempotency key reused with another body", err: ports.ErrConflict,
			status: http.StatusConflict, kind: "idempotency-conflict", detail: "conflict",
		},
		{
			name: "cancelling what has finished", err: usecases.ErrFinished,
			status: http.StatusConflict, kind: "already-finished", detail: "already finished",
		},
		{
			name: "a statement past the API pool's statement timeout", err: fmt.Errorf("listing executions: %w", sqlStateError("57014")),
			status: http.StatusServiceUnavailable, kind: "statement-timeout", retryAfter: "1",
		},
		{
			name: "a cursor this API never returned", err: errBadCursor,
			status: http.StatusBadRequest, kind: "invalid-request", detail: schemaMismatch,
			fields: []api.FieldError{{Path: "/query/cursor", Message: "not a cursor this API returned"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, p, logs := respondTo(t, tt.err)
			if rec.Code != tt.status || p.Type != problemBase+tt.kind {
				t.Fatalf("answered %d %s, want %d %s", rec.Code, p.Type, tt.status, problemBase+tt.kind)
			}
			if tt.detail != "" && (p.Detail == nil || *p.Detail != tt.detail) {
				t.Errorf("detail %v, want %q", p.Detail, tt.detail)
			}
			if tt.fields != nil && (p.Errors == nil || !reflect.DeepEqual(*p.Errors, tt.fields)) {
				t.Errorf("errors %+v, want %+v", p.Errors, tt.fields)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if logs != "" {
				t.Errorf("an expected error was logged: %s", logs)
			}
		})
	}
}

// sqlStateError is a driver error as the errorResponder sees it: a code
// behind the SQLState method.
type sqlStateError string

func (e sqlStateError) Error() string    { return "SQLSTATE " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

func TestOtherDatabaseErrorsStayInternal(t *testing.T) {
	t.Parallel()
	rec, p, logs := respondTo(t, sqlStateError("23505"))
	if rec.Code != http.StatusInternalServerError || p.Type != problemBase+"internal" || logs == "" {
		t.Errorf("a unique violation answered %d %s (logged %q), want a logged 500", rec.Code, p.Type, logs)
	}
}

func TestQuotaProblemNamesItsFieldOnlyWhenItHasOne(t *testing.T) {
	t.Parallel()
	quota := &domain.QuotaError{Quota: "nodes per graph", Limit: 3, Field: "/graph/nodes"}
	_, p, _ := respondTo(t, quota)
	if p.Errors == nil || len(*p.Errors) != 1 || (*p.Errors)[0] != (api.FieldError{Path: "/graph/nodes", Message: quota.Error()}) {
		t.Fatalf("errors %+v, want one at /graph/nodes saying %q", p.Errors, quota.Error())
	}
	_, p, _ = respondTo(t, &domain.QuotaError{Quota: "pending queue items", Limit: 2})
	if p.Errors != nil {
		t.Fatalf("errors %+v for a quota with no field, want none", *p.Errors)
	}
}

// TestUnexpectedErrorIsLoggedAndAnsweredWithoutItsText: a database error
// can carry SQL, hosts or row contents, so the client gets a bare 500 and
// the log gets the error with the request it failed.
func TestUnexpectedErrorIsLoggedAndAnsweredWithoutItsText(t *testing.T) {
	t.Parallel()
	secret := "password authentication failed for user sluice at 10.0.0.7"
	rec, p, logs := respondTo(t, errors.New(secret))
	if rec.Code != http.StatusInternalServerError || p.Type != problemBase+"internal" {
		t.Fatalf("answered %d %s, want 500 internal", rec.Code, p.Type)
	}
	if strings.Contains(rec.Body.String(), "password") || strings.Contains(rec.Body.String(), "10.0.0.7") {
		t.Fatalf("the response leaks the error: %s", rec.Body)
	}
	for _, want := range []string{"request failed", "method=GET", "path=/v1/x", "10.0.0.7"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log %q lacks %q", logs, want)
		}
	}
}

func TestDecodeFieldsNamesTheFieldWithoutGoTypeNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		into any
		want api.FieldError
	}{
		{"an integer too large for its field", `{"a":{"b":99999999999}}`, &struct{ A struct{ B int32 } }{}, api.FieldError{Path: "/A/B", Message: "number 99999999999 is not an integer in range"}},
		{"a fraction where an integer goes", `{"n":1.5}`, &struct{ N int }{}, api.FieldError{Path: "/N", Message: "number 1.5 is not an integer in range"}},
		{"a float beyond float32", `{"f":1e100}`, &struct{ F float32 }{}, api.FieldError{Path: "/F", Message: "number 1e100 is out of range"}},
		{"a member name with a slash is escaped", `{"a/b":true}`, &struct {
			AB string `json:"a/b"`
		}{}, api.FieldError{Path: "/a~1b", Message: "bool is not accepted here"}},
		{"a body that is not JSON at all", `{`, &struct{}{}, api.FieldError{Path: "/", Message: "the body cannot be decoded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := json.Unmarshal([]byte(tt.body), tt.into)
			if err == nil {
				t.Fatal("the body decoded; the case needs one that does not")
			}
			got := decodeFields(err)
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("fields %+v, want %+v", got, tt.want)
			}
			if strings.Contains(got[0].Message, "int32") || strings.Contains(got[0].Message, "float32") {
				t.Errorf("message %q names a Go type", got[0].Message)
			}
		})
	}
}
