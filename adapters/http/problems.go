package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// problemBase prefixes every problem type: stable URIs clients can switch on.
const problemBase = "https://sluice.dev/problems/"

// writeProblem writes an RFC 9457 problem document.
func writeProblem(w http.ResponseWriter, status int, kind, title, detail string, fields []api.FieldError) {
	p := api.Problem{Type: problemBase + kind, Title: title, Status: status}
	if detail != "" {
		p.Detail = &detail
	}
	if len(fields) > 0 {
		p.Errors = &fields
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// errorResponder maps errors from the use cases to problems. Handlers
// return errors rather than typed error responses so that the mapping lives
// in one place and every endpoint answers the same error the same way; an
// unexpected error is logged and answered as a bare 500 that leaks nothing.
type errorResponder struct {
	log *slog.Logger
}

func (e errorResponder) respond(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *app.InvalidError
	var ve *domain.ValidationError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &invalid):
		writeProblem(w, http.StatusUnprocessableEntity, "invalid-graph", "Invalid graph", pluralProblems(len(invalid.Problems)), fieldErrors(invalid.Problems))
	case errors.As(err, &ve):
		writeProblem(w, http.StatusUnprocessableEntity, "invalid-graph", "Invalid graph", pluralProblems(len(ve.Problems)), fieldErrors(ve.Problems))
	case errors.As(err, &tooLarge):
		writeProblem(w, http.StatusRequestEntityTooLarge, "too-large", "Payload too large", err.Error(), nil)
	case errors.Is(err, app.ErrUnauthenticated):
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "Unauthorized", err.Error(), nil)
	case errors.Is(err, app.ErrForbidden):
		writeProblem(w, http.StatusForbidden, "forbidden", "Forbidden", err.Error(), nil)
	case errors.Is(err, ports.ErrNotFound):
		writeProblem(w, http.StatusNotFound, "not-found", "Not found", err.Error(), nil)
	case errors.Is(err, ports.ErrConflict):
		writeProblem(w, http.StatusConflict, "idempotency-conflict", "Conflict", err.Error(), nil)
	case errors.Is(err, app.ErrFinished):
		writeProblem(w, http.StatusConflict, "already-finished", "Conflict", err.Error(), nil)
	case errors.Is(err, errBadRequest):
		writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", err.Error(), nil)
	default:
		e.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeProblem(w, http.StatusInternalServerError, "internal", "Internal error", "internal error", nil)
	}
}

var errBadRequest = errors.New("bad request")

func pluralProblems(n int) string {
	if n == 1 {
		return "1 problem"
	}
	return fmt.Sprintf("%d problems", n)
}

func fieldErrors(ps []domain.Problem) []api.FieldError {
	out := make([]api.FieldError, len(ps))
	for i, p := range ps {
		out[i] = api.FieldError{Path: p.Path, Message: p.Message}
	}
	return out
}

// validationFields turns kin-openapi's request errors into field paths.
func validationFields(err error) []api.FieldError {
	var out []api.FieldError
	var walk func(error)
	walk = func(err error) {
		var multi openapi3.MultiError
		if errors.As(err, &multi) {
			for _, e := range multi {
				walk(e)
			}
			return
		}
		var schemaErr *openapi3.SchemaError
		if errors.As(err, &schemaErr) {
			path := "/" + strings.Join(schemaErr.JSONPointer(), "/")
			var reqErr *openapi3filter.RequestError
			if errors.As(err, &reqErr) && reqErr.Parameter != nil {
				path = "/" + reqErr.Parameter.In + "/" + reqErr.Parameter.Name
			}
			out = append(out, api.FieldError{Path: path, Message: schemaErr.Reason})
			return
		}
		var reqErr *openapi3filter.RequestError
		if errors.As(err, &reqErr) {
			path := "/body"
			if reqErr.Parameter != nil {
				path = "/" + reqErr.Parameter.In + "/" + reqErr.Parameter.Name
			}
			msg := reqErr.Reason
			if reqErr.Err != nil {
				msg = strings.TrimSpace(msg + " " + reqErr.Err.Error())
			}
			out = append(out, api.FieldError{Path: path, Message: msg})
			return
		}
		out = append(out, api.FieldError{Path: "/", Message: err.Error()})
	}
	walk(err)
	return out
}
