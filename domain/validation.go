package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Problem is one thing wrong with a submitted document. Path points at the
// offending value in JSON-pointer style ("/nodes/2/key", "/edges/0/to",
// "/nodes/1/config/url"; "" is the whole document), so an API can show each
// message next to the field it is about.
type Problem struct {
	// Path is the JSON pointer of the offending value.
	Path string `json:"path"`
	// Message says what is wrong, in words meant for the author of the
	// document.
	Message string `json:"message"`
}

// String renders the problem as "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// FieldError is a request value the schema accepts but a rule refuses: a
// notBefore past the horizon, a cron expression that does not parse, a
// batch too large. Field is the JSON pointer of the value.
type FieldError struct {
	// Field is the JSON pointer of the value at fault.
	Field string
	// Message says what is wrong with it.
	Message string
}

// Error says which field and what is wrong with it.
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// ValidationError lists every problem found in a document. Validation does
// not stop at the first problem, so a user can fix a graph in one round trip
// instead of one per mistake.
type ValidationError struct {
	// Problems are in document order.
	Problems []Problem
}

// Error joins the problems with "; ".
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid: " + strings.Join(parts, "; ")
}

// add records a problem.
func (e *ValidationError) add(path, format string, args ...any) {
	e.Problems = append(e.Problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// errOrNil returns e as an error if it holds problems, else nil. Returning a
// typed nil pointer as an error would make err != nil true.
func (e *ValidationError) errOrNil() error {
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}

// member is one name/value pair of a JSON object, in document order.
type member struct {
	name string
	raw  json.RawMessage
}

// decodeObject reads data as exactly one JSON object, rejecting duplicate
// member names (which encoding/json would silently resolve to the last one)
// and trailing data. Unlike encoding/json, names are matched exactly by the
// callers, not case-insensitively.
func decodeObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxProblem(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("must be a JSON object, not %s", jsonKind(tok))
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxProblem(err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, errors.New("malformed JSON object")
		}
		if seen[name] {
			return nil, fmt.Errorf("duplicate field %q", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, syntaxProblem(err)
		}
		out = append(out, member{name: name, raw: raw})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, syntaxProblem(err)
	}
	if err := expectEOF(dec); err != nil {
		return nil, err
	}
	return out, nil
}

// expectEOF fails if dec has anything but white space left.
func expectEOF(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// syntaxProblem turns a decoding error into a short message with the offset.
func syntaxProblem(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at offset %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %s", err.Error())
}

// jsonKind names the JSON kind of a token from json.Decoder.Token.
func jsonKind(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "an unknown value"
}

// rawKind names the JSON kind of a syntactically valid raw value.
func rawKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// isNull reports whether raw is absent or the JSON literal null.
func isNull(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// objectFields decodes raw as an object for the document at path, reporting
// problems to ve. Only names in allowed are accepted (nil allows any name).
// It returns false when raw is not a usable object.
func objectFields(raw []byte, path string, ve *ValidationError, allowed []string) (map[string]json.RawMessage, bool) {
	members, err := decodeObject(raw)
	if err != nil {
		ve.add(path, "%s", err.Error())
		return nil, false
	}
	out := make(map[string]json.RawMessage, len(members))
	ok := true
	for _, m := range members {
		if allowed != nil && !contains(allowed, m.name) {
			ve.add(path+"/"+JSONPointerToken(m.name), "unknown field %q (allowed: %s)", m.name, strings.Join(allowed, ", "))
			ok = false
			continue
		}
		out[m.name] = m.raw
	}
	return out, ok
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stringField decodes a JSON string. A non-string (null included) is a
// problem; ok is false then.
func stringField(raw []byte, path string, ve *ValidationError) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		ve.add(path, "must be a string, not %s", rawKind(raw))
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		ve.add(path, "%s", syntaxProblem(err).Error())
		return "", false
	}
	return s, true
}

// walkStrings calls fn for every string in the JSON tree v, with its
// pointer below at (rendered by the caller only when it reports a problem).
// Object members are visited in sorted order so problems come out
// deterministically.
func walkStrings(v any, at *pointerPath, fn func(at *pointerPath, s string)) {
	switch t := v.(type) {
	case string:
		fn(at, t)
	case []any:
		for i, e := range t {
			walkStrings(e, &pointerPath{parent: at, index: i}, fn)
		}
	case map[string]any:
		for _, k := range sortedKeys(t) {
			walkStrings(t[k], &pointerPath{parent: at, name: k, isName: true}, fn)
		}
	}
}

// checkTemplates reports every string in the raw JSON value that is not a
// well-formed template, so mistakes surface when a graph is saved rather than
// when it runs.
func checkTemplates(raw []byte, path string, ve *ValidationError) {
	if isNull(raw) {
		return
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		ve.add(path, "%s", syntaxProblem(err).Error())
		return
	}
	walkStrings(v, nil, func(at *pointerPath, s string) {
		if _, err := ParseTemplate(s); err != nil {
			ve.add(path+at.String(), "%s", err.Error())
		}
	})
}
