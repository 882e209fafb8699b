package domain

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestIDRoundTripsThroughTextJSONAndSQL(t *testing.T) {
	t.Parallel()
	const text = "0f8fad5b-d9cb-469f-a165-70867728950e"
	id, err := ParseID(text)
	if err != nil {
		t.Fatal(err)
	}
	if id.String() != text {
		t.Fatalf("String() = %s, want %s", id, text)
	}
	upper, err := ParseID("0F8FAD5B-D9CB-469F-A165-70867728950E")
	if err != nil || upper != id {
		t.Fatalf("upper case parsed to %s, %v", upper, err)
	}
	b, err := json.Marshal(struct{ ID ID }{id})
	if err != nil || string(b) != `{"ID":"`+text+`"}` {
		t.Fatalf("json: %s, %v", b, err)
	}
	var back struct{ ID ID }
	if err := json.Unmarshal(b, &back); err != nil || back.ID != id {
		t.Fatalf("json back: %s, %v", back.ID, err)
	}
	v, err := id.Value()
	if err != nil || v != text {
		t.Fatalf("Value() = %v, %v", v, err)
	}
	for _, src := range []any{text, []byte(text), id[:], [16]byte(id)} {
		var scanned ID
		if err := scanned.Scan(src); err != nil || scanned != id {
			t.Errorf("Scan(%T) = %s, %v", src, scanned, err)
		}
	}
}

func TestParseIDRefusesWhatIsNotAUUID(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "0f8fad5b", "0f8fad5bd9cb469fa16570867728950e", "0f8fad5b-d9cb-469f-a165-70867728950g", "0f8fad5b_d9cb-469f-a165-70867728950e"} {
		if _, err := ParseID(s); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseID(%q) = %v, want ErrInvalidID", s, err)
		}
	}
	var id ID
	if err := id.Scan(42); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Scan(int) = %v, want ErrInvalidID", err)
	}
}
