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

// ReusableOutput returns the output a retry may reuse in place of running
// the node again: that of a COMPLETED node, unless it was truncated at the
// record bound (a TruncatedMarker object), which the node must make anew.
func (n NodeRecord) ReusableOutput() (json.RawMessage, bool) {
	if n.Status != NodeCompleted || len(n.Output) == 0 {
		return nil, false
	}
	var probe map[string]json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(n.Output), []byte("{")) && json.Unmarshal(n.Output, &probe) == nil {
		if _, cut := probe[TruncatedMarker]; cut && len(probe) == 1 {
			return nil, false
		}
	}
	return n.Output, true
}

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

// BoundedJSON returns raw storable (StorableJSON) and at most limit bytes:
// a value over limit is replaced by the TruncatedMarker object holding its true
// size and a preview of its first bytes as text (never split inside a
// character), the whole object within limit bytes, so a reader always sees
// that it was cut and by how much. Nothing is cut silently.
func BoundedJSON(raw json.RawMessage, limit int) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	size := len(raw)
	raw = StorableJSON(raw)
	if limit <= 0 || len(raw) <= limit {
		return raw
	}
	head := []byte(`{"` + TruncatedMarker + `":{"bytes":` + strconv.Itoa(size) + `,"preview":`)
	room := limit - len(head) - len("}}")
	// Escaping can make the preview longer than the text it shows (a
	// quote takes two bytes, a control character six), so the cut shrinks
	// until the encoded preview fits.
	cut := room - 2
	for {
		cut = runeStart(raw, cut)
		preview := jsonString(raw[:cut])
		if len(preview) <= room || cut == 0 {
			out := append(head, preview...)
			return append(out, "}}"...)
		}
		cut = cut * room / len(preview)
	}
}

// jsonString encodes b as a JSON string, without HTML escapes.
func jsonString(b []byte) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(b)) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// runeStart moves cut back to the start of the character it falls in.
func runeStart(b []byte, cut int) int {
	cut = min(max(cut, 0), len(b))
	for cut > 0 && cut < len(b) && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return cut
}

// BoundedText returns s storable (StorableText) and at most limit bytes: a
// longer one keeps its first bytes and says how long it was.
func BoundedText(s string, limit int) string {
	size := len(s)
	s = StorableText(s)
	if limit <= 0 || len(s) <= limit {
		return s
	}
	tail := "… [truncated: " + strconv.Itoa(size) + " bytes]"
	return s[:runeStart([]byte(s), limit-len(tail))] + tail
}

// Storable returns the record as it may be stored: input, output and error
// storable and each within limit bytes (BoundedJSON, BoundedText). It is the
// one rule for what a node record keeps.
func (n NodeRecord) Storable(limit int) NodeRecord {
	n.Input = BoundedJSON(n.Input, limit)
	n.Output = BoundedJSON(n.Output, limit)
	if n.Error != nil {
		msg := BoundedText(*n.Error, limit)
		n.Error = &msg
	}
	return n
}
