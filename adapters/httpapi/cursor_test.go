package httpapi

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

func TestExecutionCursorRoundTripsToTheMicrosecond(t *testing.T) {
	t.Parallel()
	id := domain.ID{0xde, 0xad, 0xbe, 0xef, 15: 1}
	tests := []struct {
		name string
		at   time.Time
	}{
		{"now, in another zone", time.Date(2026, 11, 25, 7, 1, 2, 345678000, time.FixedZone("CET", 3600))},
		{"before 1970", time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC)},
		{"the earliest time Postgres can page from", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"the latest", time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := encodeExecutionCursor(ports.ExecutionCursor{AdmittedAt: tt.at, ID: id})
			got, err := decodeExecutionCursor(s)
			if err != nil {
				t.Fatalf("decoding our own cursor %q: %v", s, err)
			}
			if !got.AdmittedAt.Equal(tt.at) || got.ID != id {
				t.Fatalf("got %v %v, want %v %v", got.AdmittedAt, got.ID, tt.at, id)
			}
		})
	}
}

// TestExecutionCursorDropsNanosecondsAsPostgresDoes: a timestamptz keeps
// microseconds, so the cursor carries no more than the row it came from.
func TestExecutionCursorDropsNanosecondsAsPostgresDoes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	got, err := decodeExecutionCursor(encodeExecutionCursor(ports.ExecutionCursor{AdmittedAt: at, ID: domain.ID{1}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Truncate(time.Microsecond); !got.AdmittedAt.Equal(want) {
		t.Fatalf("got %v, want %v", got.AdmittedAt, want)
	}
}

func TestExecutionCursorRefusesWhatThisAPINeverReturned(t *testing.T) {
	t.Parallel()
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	id := domain.ID{1}.String()
	tests := []struct{ name, cursor string }{
		{"empty", ""},
		{"not base64url", "!!!"},
		{"padded base64", base64.URLEncoding.EncodeToString([]byte("1." + id))},
		{"no separator", enc("1" + id)},
		{"a time that is not a number", enc("soon." + id)},
		{"a time beyond int64", enc("99999999999999999999." + id)},
		{"a time before year 1", enc("-62135596800000001." + id)},
		{"a time after year 9999", enc("253402300800000000." + id)},
		{"an id that is not a UUID", enc("1.not-an-id")},
		{"a bare id, as the other lists page", id},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeExecutionCursor(tt.cursor)
			var bad *badRequestError
			if !errors.As(err, &bad) || bad.path != "/query/cursor" {
				t.Fatalf("err = %v, want a bad request at /query/cursor", err)
			}
		})
	}
}

func TestIDPageReadsTheLastIDAsTheCursor(t *testing.T) {
	t.Parallel()
	id := domain.ID{7, 15: 9}
	s := id.String()
	limit := 3
	p, err := idPage(&limit, &s)
	if err != nil {
		t.Fatal(err)
	}
	if p.Limit != 3 || p.After == nil || *p.After != id {
		t.Fatalf("page %+v, want limit 3 after %v", p, id)
	}
	p, err = idPage(nil, nil)
	if err != nil || p.Limit != defaultPageSize || p.After != nil {
		t.Fatalf("no parameters: page %+v, %v; want the default size from the start", p, err)
	}
	bad := "0f"
	if _, err = idPage(nil, &bad); !errors.Is(err, errBadCursor) {
		t.Fatalf("a cursor that is not an id: %v, want errBadCursor", err)
	}
}

func TestIDPageOutNamesANextCursorOnlyWhenThePageIsFull(t *testing.T) {
	t.Parallel()
	ids := []domain.ID{{1}, {2}, {3}}
	self := func(id domain.ID) domain.ID { return id }
	tests := []struct {
		name  string
		items []domain.ID
		limit int
		want  *string
	}{
		{"a full page points past its last item", ids, 3, ptrTo(ids[2].String())},
		{"a short page is the last", ids[:2], 3, nil},
		{"an empty page is the last", nil, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, next := idPageOut(tt.items, ports.Page{Limit: tt.limit}, self, domain.ID.String)
			if len(out) != len(tt.items) {
				t.Fatalf("%d items out, want %d", len(out), len(tt.items))
			}
			if (next == nil) != (tt.want == nil) || (next != nil && *next != *tt.want) {
				t.Fatalf("next cursor %v, want %v", deref(next), deref(tt.want))
			}
		})
	}
}

func ptrTo(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}
