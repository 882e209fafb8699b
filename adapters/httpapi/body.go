package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/domain"
)

// RequestLimits bound what one request may cost before any handler sees it.
type RequestLimits struct {
	// MaxBodyBytes refuses larger bodies with 413, before they are read.
	MaxBodyBytes int64
	// MaxJSONDepth refuses JSON nested deeper (objects and arrays) with 400,
	// before anything decodes it into a tree.
	MaxJSONDepth int
	// Tenancy bounds the requests each workspace and the process have in
	// flight, and each workspace's rate.
	Tenancy Tenancy
}

// DefaultRequestLimits are 1 MiB bodies nested at most 64 deep, and the default
// Tenancy.
func DefaultRequestLimits() RequestLimits {
	return RequestLimits{MaxBodyBytes: 1 << 20, MaxJSONDepth: 64, Tenancy: DefaultTenancy()}
}

// checkJSONBody refuses JSON bodies that schema validation would let
// through but that are not what they claim, or that would cost more than
// their size to look at: nesting deeper than MaxJSONDepth, bytes that are
// not UTF-8 (the decoders would silently turn them into U+FFFD), numbers
// beyond float64's range, strings
// holding U+0000 (which Postgres cannot store in text or jsonb), and a
// document followed by more data (the decoders would read the first and
// drop the rest). Each refusal is a 400 naming where. The check is one
// streaming pass that keeps only the current path, so its memory and time
// are linear in the body; a path string is built only for a problem.
func checkJSONBody(errs errorResponder, maxDepth int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || !isJSON(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				errs.respond(w, r, tooLarge)
				return
			}
			writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", "the request body could not be read", nil)
			return
		}
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if problem := jsonBodyProblem(body, maxDepth); problem != nil {
			writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", schemaMismatch, []api.FieldError{*problem})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isJSON reports whether a body is to be checked as JSON. A Content-Type
// whose parameters do not parse is judged by its media type alone: the
// server's decoder reads the body all the same, so a malformed parameter
// must not be a way past the checks.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// jsonFrame is one open object or array on the path to the current token.
type jsonFrame struct {
	array bool
	index int
	// key is the member whose value comes next; valid once keySeen.
	key     string
	keySeen bool
}

// jsonPath tracks where a streaming decoder is, without building strings.
type jsonPath []jsonFrame

// pointer renders the path as a JSON pointer; only called for a problem.
func (p jsonPath) pointer() string {
	var b strings.Builder
	for _, f := range p {
		switch {
		case f.array:
			b.WriteByte('/')
			b.WriteString(strconv.Itoa(f.index))
		case f.keySeen:
			b.WriteByte('/')
			b.WriteString(domain.JSONPointerToken(f.key))
		}
	}
	return orRoot(b.String())
}

// expectsKey reports whether the next string is a member name.
func (p jsonPath) expectsKey() bool {
	return len(p) > 0 && !p[len(p)-1].array && !p[len(p)-1].keySeen
}

// valueDone moves past one complete value in the innermost container.
func (p jsonPath) valueDone() {
	if len(p) == 0 {
		return
	}
	top := &p[len(p)-1]
	if top.array {
		top.index++
	} else {
		top.keySeen = false
	}
}

// jsonBodyProblem finds the first problem in body, or nil. A body that is
// not JSON at all is left to the schema validator, which says so.
func jsonBodyProblem(body []byte, maxDepth int) *api.FieldError {
	badUTF8 := -1
	if !utf8.Valid(body) {
		badUTF8 = firstInvalidUTF8(body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var path jsonPath
	for {
		offset := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or not JSON: the schema validator says which
		}
		if badUTF8 >= 0 && offset <= int64(badUTF8) && dec.InputOffset() > int64(badUTF8) {
			if _, isString := tok.(string); isString && path.expectsKey() {
				return &api.FieldError{Path: path.pointer(), Message: "has a property name that is not valid UTF-8"}
			}
			return &api.FieldError{Path: path.pointer(), Message: "is not valid UTF-8"}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(path) >= maxDepth {
					return &api.FieldError{Path: path.pointer(), Message: fmt.Sprintf("nests deeper than %d levels", maxDepth)}
				}
				path = append(path, jsonFrame{array: t == '['})
			case '}', ']':
				path = path[:len(path)-1]
				path.valueDone()
				if len(path) == 0 {
					if _, err := dec.Token(); !errors.Is(err, io.EOF) {
						return &api.FieldError{Path: "/", Message: "unexpected data after the JSON document"}
					}
					return nil
				}
			}
		case string:
			if path.expectsKey() {
				top := &path[len(path)-1]
				top.key, top.keySeen = t, true
				if strings.IndexByte(t, 0) >= 0 {
					return &api.FieldError{Path: path.pointer(), Message: "property name " + nulMessage}
				}
				continue
			}
			if strings.IndexByte(t, 0) >= 0 {
				return &api.FieldError{Path: path.pointer(), Message: nulMessage}
			}
			path.valueDone()
		case json.Number:
			// Values beyond float64 are stored, but no template, condition
			// or client could use them.
			if _, err := strconv.ParseFloat(string(t), 64); err != nil {
				return &api.FieldError{Path: path.pointer(), Message: "is a number out of range"}
			}
			path.valueDone()
		default:
			path.valueDone()
		}
		if len(path) == 0 {
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return &api.FieldError{Path: "/", Message: "unexpected data after the JSON document"}
			}
			return nil
		}
	}
}

const nulMessage = "must not contain the NUL character (\\u0000)"

// firstInvalidUTF8 returns the offset of the first byte that does not
// start a valid UTF-8 sequence.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
