package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/api"
)

// checkJSONBody refuses JSON bodies that schema validation lets through but
// that are not what they claim: a document followed by more data (the
// decoders would read the first and drop the rest), and strings holding
// U+0000, which Postgres cannot store in text or jsonb, so that such a
// request got a 500 after validation. Each refusal is a 400 naming where.
func checkJSONBody(errs errorResponder, next http.Handler) http.Handler {
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
		if fields := jsonBodyProblems(body); len(fields) > 0 {
			writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", schemaMismatch, fields)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// jsonBodyProblems finds trailing data and NUL characters. A body that is
// not JSON at all is left to the schema validator, which says so.
func jsonBodyProblems(body []byte) []api.FieldError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return []api.FieldError{{Path: "/", Message: "unexpected data after the JSON document"}}
	}
	var out []api.FieldError
	findNUL(v, "", &out)
	return out
}

const nulMessage = "must not contain the NUL character (\\u0000)"

func findNUL(v any, path string, out *[]api.FieldError) {
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, 0) {
			*out = append(*out, api.FieldError{Path: orRoot(path), Message: nulMessage})
		}
	case []any:
		for i, e := range v {
			findNUL(e, path+"/"+strconv.Itoa(i), out)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // stable messages
		for _, k := range keys {
			p := path + "/" + escapePointer(k)
			if strings.ContainsRune(k, 0) {
				*out = append(*out, api.FieldError{Path: p, Message: "property name " + nulMessage})
			}
			findNUL(v[k], p, out)
		}
	}
}
