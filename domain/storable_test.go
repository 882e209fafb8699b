package domain

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStorableJSONReplacesNULAndInvalidUTF8Visibly(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"a\x00": []any{"x\x00y", 1.0, true, nil},
		"ok":    `a backslash-u: \u0000 stays text`,
		"bad":   "caf\xe9",
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw[:len(raw)-1], []byte(",\"raw\":\"z\xff\"}")...)
	got := StorableJSON(raw)
	var back map[string]any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("not JSON any more: %v: %s", err, got)
	}
	if strings.Contains(strings.ReplaceAll(string(got), `\\u0000`, ""), `\u0000`) {
		t.Errorf("NUL left in %s", got)
	}
	if back["ok"] != `a backslash-u: \u0000 stays text` {
		t.Errorf("literal text changed: %q", back["ok"])
	}
	if arr, _ := back["a\uFFFD"].([]any); len(arr) != 4 || arr[0] != "x\uFFFDy" {
		t.Errorf("array = %v", back["a\uFFFD"])
	}
	if back["raw"] != "z\uFFFD" || back["bad"] != "caf\uFFFD" {
		t.Errorf("invalid UTF-8 kept: %q %q", back["raw"], back["bad"])
	}
}

func TestStorableTextReplacesNULAndInvalidUTF8Visibly(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"x509: certificate is valid for evil\x00.example": "x509: certificate is valid for evil\uFFFD.example",
		"caf\xe9":  "caf\uFFFD",
		"plain ok": "plain ok",
	} {
		if got := StorableText(in); got != want {
			t.Errorf("StorableText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBoundedJSONKeepsAMarkedPreviewAndTheTrueSize(t *testing.T) {
	t.Parallel()
	small := json.RawMessage(`{"a":1}`)
	if got := BoundedJSON(small, 100); string(got) != string(small) {
		t.Errorf("a value under the bound changed: %s", got)
	}
	big, _ := json.Marshal(map[string]string{"body": strings.Repeat("é", 5000)})
	got := BoundedJSON(big, 1000)
	var marked map[string]struct {
		Bytes   int    `json:"bytes"`
		Preview string `json:"preview"`
	}
	if err := json.Unmarshal(got, &marked); err != nil {
		t.Fatalf("preview is not JSON: %v", err)
	}
	m, ok := marked[TruncatedMarker]
	if !ok || m.Bytes != len(big) {
		t.Fatalf("marker = %+v, want the true size %d", marked, len(big))
	}
	if !strings.HasPrefix(string(big), m.Preview) || len(m.Preview) < 900 {
		t.Errorf("preview is %d bytes, want the first bytes of the value, cut on a character", len(m.Preview))
	}
	if len(got) > 1000 {
		t.Errorf("bounded value is %d bytes, over the bound of 1000", len(got))
	}
	// Text that escaping lengthens six times still fits.
	ctl, _ := json.Marshal(strings.Repeat("\x01", 5000))
	if got := BoundedJSON(ctl, 1000); len(got) > 1000 || !json.Valid(got) {
		t.Errorf("control characters: %d bytes (valid JSON: %v), want at most 1000", len(got), json.Valid(got))
	}
}

func TestNodeRecordStorableBoundsEveryValue(t *testing.T) {
	t.Parallel()
	msg := strings.Repeat("e\x00", 1000)
	n := NodeRecord{Input: json.RawMessage(`"` + strings.Repeat("i", 3000) + `"`), Output: json.RawMessage(`"` + strings.Repeat("o", 3000) + `"`), Error: &msg}
	got := n.Storable(1024)
	if len(got.Input) > 1024 || len(got.Output) > 1024 || len(*got.Error) > 1024 {
		t.Errorf("sizes %d/%d/%d, want each about 1 KiB", len(got.Input), len(got.Output), len(*got.Error))
	}
	if strings.ContainsRune(*got.Error, 0) || !strings.Contains(*got.Error, "[truncated: 2000 bytes]") {
		t.Errorf("error = %q", *got.Error)
	}
}
