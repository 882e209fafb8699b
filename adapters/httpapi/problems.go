package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
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
	var ve *domain.ValidationError
	var badInput *domain.InputError
	var tooLarge *http.MaxBytesError
	var bad *badRequestError
	var quota *domain.QuotaError
	var field *domain.FieldError
	switch {
	case errors.As(err, &quota):
		var fields []api.FieldError
		if quota.Field != "" {
			fields = []api.FieldError{{Path: quota.Field, Message: quota.Error()}}
		}
		if quota.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(quota.RetryAfter.Seconds()))))
		}
		writeProblem(w, http.StatusTooManyRequests, "quota-exceeded", "Quota exceeded", quota.Error(), fields)
	case errors.As(err, &ve) && errors.Is(err, usecases.ErrPolicyCap):
		writeProblem(w, http.StatusUnprocessableEntity, "policy-cap", "Past the plan's cap", pluralProblems(len(ve.Problems)), fieldErrors(ve.Problems))
	case errors.As(err, &badInput):
		writeProblem(w, http.StatusUnprocessableEntity, "invalid-input", "Invalid input", pluralProblems(len(badInput.Problems)), fieldErrors(badInput.Problems))
	case errors.As(err, &ve) && errors.Is(err, usecases.ErrInvalidGraph):
		writeProblem(w, http.StatusUnprocessableEntity, "invalid-graph", "Invalid graph", pluralProblems(len(ve.Problems)), fieldErrors(ve.Problems))
	case errors.As(err, &ve):
		// Any other rule's problems (a limit, a host): refused fields.
		writeProblem(w, http.StatusUnprocessableEntity, "invalid-field", "Invalid field", pluralProblems(len(ve.Problems)), fieldErrors(ve.Problems))
	case errors.As(err, &tooLarge):
		writeProblem(w, http.StatusRequestEntityTooLarge, "too-large", "Payload too large", err.Error(), nil)
	case errors.Is(err, usecases.ErrUnauthenticated):
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "Unauthorized", err.Error(), nil)
	case errors.Is(err, usecases.ErrForbidden):
		writeProblem(w, http.StatusForbidden, "forbidden", "Forbidden", err.Error(), nil)
	case errors.Is(err, ports.ErrNotFound):
		writeProblem(w, http.StatusNotFound, "not-found", "Not found", err.Error(), nil)
	case errors.Is(err, ports.ErrConflict):
		writeProblem(w, http.StatusConflict, "idempotency-conflict", "Conflict", err.Error(), nil)
	case errors.Is(err, domain.ErrScheduleState):
		writeProblem(w, http.StatusConflict, "schedule-state", "Conflict", err.Error(), nil)
	case errors.Is(err, usecases.ErrNotWaiting):
		writeProblem(w, http.StatusConflict, "not-waiting", "Conflict", err.Error(), nil)
	case errors.Is(err, usecases.ErrFinished):
		writeProblem(w, http.StatusConflict, "already-finished", "Conflict", err.Error(), nil)
	case errors.Is(err, usecases.ErrNotRetryable):
		writeProblem(w, http.StatusConflict, "not-retryable", "Conflict", err.Error(), nil)
	case errors.As(err, &field):
		writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", field.Error(), []api.FieldError{{Path: field.Field, Message: field.Message}})
	case errors.As(err, &bad):
		writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", schemaMismatch, []api.FieldError{{Path: bad.path, Message: bad.message}})
	case statementCancelled(err):
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "statement-timeout", "Service unavailable",
			"the request needed longer than the server allows one database statement; try again shortly, or ask for less (a smaller page)", nil)
	default:
		e.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeProblem(w, http.StatusInternalServerError, "internal", "Internal error", "internal error", nil)
	}
}

// statementCancelled reports Postgres's query_canceled (SQLSTATE 57014),
// which is how a statement past the API pool's statement_timeout ends. It
// reads the SQLState method the driver's error has rather than the
// driver's type, so this adapter does not depend on the driver.
func statementCancelled(err error) bool {
	var coded interface{ SQLState() string }
	return errors.As(err, &coded) && coded.SQLState() == "57014"
}

// badRequestError is a request the schema accepts but the handlers cannot
// serve, such as a cursor this API never returned; path says where.
type badRequestError struct {
	path, message string
}

func (e *badRequestError) Error() string { return e.path + ": " + e.message }

func badRequest(path, message string) error {
	return &badRequestError{path: path, message: message}
}

// schemaMismatch is the detail of every 400 that lists field errors.
const schemaMismatch = "the request does not match the API schema"

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

// validationFields turns kin-openapi's request errors into field paths:
// "/in/name" for a parameter ("/query/limit", "/path/workspaceId") and a
// JSON pointer into the body for a body field ("/graph/nodes/0/key").
func validationFields(err error) []api.FieldError {
	var out []api.FieldError
	var walk func(err error, base string)
	walk = func(err error, base string) {
		// Type switches, not errors.As: a RequestError wraps a MultiError of
		// SchemaErrors, and matching the inner errors first would lose the
		// parameter they belong to.
		switch e := err.(type) { //nolint:errorlint // outermost first, on purpose: see above
		case openapi3.MultiError:
			for _, inner := range e {
				walk(inner, base)
			}
			return
		case *openapi3filter.RequestError:
			if e.Parameter != nil {
				base = "/" + e.Parameter.In + "/" + e.Parameter.Name
			}
			var multi openapi3.MultiError
			var schemaErr *openapi3.SchemaError
			if errors.As(e.Err, &multi) || errors.As(e.Err, &schemaErr) {
				walk(e.Err, base)
				return
			}
			msg := e.Reason
			if e.Err != nil {
				msg = strings.TrimSpace(msg + " " + e.Err.Error())
			}
			out = append(out, api.FieldError{Path: orRoot(base), Message: msg})
			return
		case *openapi3.SchemaError:
			path := base
			for _, seg := range e.JSONPointer() {
				path += "/" + domain.JSONPointerToken(seg)
			}
			if name, ok := unsupportedProperty(e); ok {
				path += "/" + domain.JSONPointerToken(name)
			}
			out = append(out, api.FieldError{Path: orRoot(path), Message: e.Reason})
			return
		}
		var multi openapi3.MultiError
		var reqErr *openapi3filter.RequestError
		var schemaErr *openapi3.SchemaError
		switch {
		case errors.As(err, &multi):
			walk(multi, base)
			return
		case errors.As(err, &reqErr):
			walk(reqErr, base)
			return
		case errors.As(err, &schemaErr):
			walk(schemaErr, base)
			return
		}
		out = append(out, api.FieldError{Path: orRoot(base), Message: err.Error()})
	}
	walk(err, "")
	return out
}

// unsupportedProperty reads the name out of kin-openapi's error for a
// property that additionalProperties: false forbids, which points at the
// object rather than at the property.
func unsupportedProperty(e *openapi3.SchemaError) (string, bool) {
	if e.SchemaField != "properties" {
		return "", false
	}
	quoted, ok := strings.CutPrefix(e.Reason, "property ")
	if !ok {
		return "", false
	}
	quoted, ok = strings.CutSuffix(quoted, " is unsupported")
	if !ok {
		return "", false
	}
	name, err := strconv.Unquote(quoted)
	return name, err == nil
}

func orRoot(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// decodeFields names the field a body failed to decode into, without the
// Go type names that json's own message carries.
func decodeFields(err error) []api.FieldError {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return []api.FieldError{{Path: "/", Message: "the body cannot be decoded"}}
	}
	path := "/"
	if te.Field != "" {
		segs := strings.Split(te.Field, ".")
		for i, s := range segs {
			segs[i] = domain.JSONPointerToken(s)
		}
		path += strings.Join(segs, "/")
	}
	msg := te.Value + " is not accepted here"
	if te.Type != nil {
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			msg = te.Value + " is not an integer in range"
		case reflect.Float32, reflect.Float64:
			msg = te.Value + " is out of range"
		}
	}
	return []api.FieldError{{Path: path, Message: msg}}
}

// paramFields names the parameter the generated router could not bind
// (say, a version beyond the range of int), locating it in the request.
func paramFields(r *http.Request, err error) []api.FieldError {
	var name string
	var format *api.InvalidParamFormatError
	var required *api.RequiredParamError
	var header *api.RequiredHeaderError
	var tooMany *api.TooManyValuesForParamError
	var unmarshal *api.UnmarshalingParamError
	switch {
	case errors.As(err, &format):
		name = format.ParamName
	case errors.As(err, &required):
		name = required.ParamName
	case errors.As(err, &header):
		name = header.ParamName
	case errors.As(err, &tooMany):
		name = tooMany.ParamName
	case errors.As(err, &unmarshal):
		name = unmarshal.ParamName
	default:
		return []api.FieldError{{Path: "/", Message: "invalid parameter"}}
	}
	in := "path"
	switch {
	case r.URL.Query().Has(name):
		in = "query"
	case r.Header.Get(name) != "":
		in = "header"
	}
	return []api.FieldError{{Path: "/" + in + "/" + name, Message: "invalid value"}}
}
