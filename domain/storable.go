package domain

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultRecordValueMax is the default bound, in bytes, on each value a
// node record keeps: its input, its output and its error.
const DefaultRecordValueMax = 16 * 1024

// TruncatedMarker is the one member of the object a record keeps in place
// of a value over the record bound: {"sluice:truncated": {"bytes": <the
// value's true size>, "preview": "<its first bytes, as text>"}}.
const TruncatedMarker = "sluice:truncated"

// StorableText returns s as PostgreSQL can store it in text: every NUL and
// every byte that is not UTF-8 is replaced by U+FFFD, visibly rather than
// dropped. Errors from third parties (a TLS certificate's name, a server's
// reason phrase) can carry either, and a write Postgres refuses would be
// retried for ever.
func StorableText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// StorableJSON returns raw as PostgreSQL can store it in jsonb: bytes that
// are not UTF-8 and every \u0000 escape (which jsonb refuses) become
// U+FFFD. Only escapes are rewritten: a backslash that is itself escaped
// (\\u0000 in the text) is kept.
func StorableJSON(raw json.RawMessage) json.RawMessage {
	if !utf8.Valid(raw) {
		raw = bytes.ToValidUTF8(raw, []byte("\uFFFD"))
	}
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return raw
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			out = append(out, raw[i])
			continue
		}
		if bytes.HasPrefix(raw[i+1:], []byte("u0000")) {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, raw[i], raw[i+1])
		i++
	}
	return out
}

// BoundedJSON returns raw storable (StorableJSON) and at most about max
// bytes: a value over max is replaced by the TruncatedMarker object
// holding its true size and a preview of its first max bytes as text
// (never split inside a character), so a reader always sees that it was
// cut and by how much. Nothing is cut silently.
func BoundedJSON(raw json.RawMessage, max int) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	size := len(raw)
	raw = StorableJSON(raw)
	if max <= 0 || len(raw) <= max {
		return raw
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	preview, err := json.Marshal(string(raw[:cut]))
	if err != nil {
		preview = []byte(`""`)
	}
	out := make([]byte, 0, len(preview)+64)
	out = append(out, `{"`+TruncatedMarker+`":{"bytes":`...)
	out = strconv.AppendInt(out, int64(size), 10)
	out = append(out, `,"preview":`...)
	out = append(out, preview...)
	return append(out, "}}"...)
}

// BoundedText returns s storable (StorableText) and at most max bytes: a
// longer one keeps its first bytes and says how long it was.
func BoundedText(s string, max int) string {
	size := len(s)
	s = StorableText(s)
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… [truncated: " + strconv.Itoa(size) + " bytes]"
}

// Storable returns the record as it may be stored: input, output and error
// storable and each within max bytes (BoundedJSON, BoundedText). It is the
// one rule for what a node record keeps.
func (n NodeRecord) Storable(max int) NodeRecord {
	n.Input = BoundedJSON(n.Input, max)
	n.Output = BoundedJSON(n.Output, max)
	if n.Error != nil {
		msg := BoundedText(*n.Error, max)
		n.Error = &msg
	}
	return n
}
