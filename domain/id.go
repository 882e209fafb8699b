package domain

import (
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
)

// ID identifies an entity: a workspace, key, definition, queue item or
// execution. It is a UUID in its 16 bytes. The domain only names, compares,
// prints and parses IDs; adapters generate them (github.com/google/uuid's
// UUID converts to ID and back, having the same representation), so that
// the rules here stay free of randomness.
type ID [16]byte

// NilID is the zero ID, which names nothing.
var NilID ID

// ErrInvalidID is wrapped by ParseID for text that is not a UUID.
var ErrInvalidID = errors.New("invalid id")

// ParseID reads the canonical 36-character form
// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, upper or lower case.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("%w: %q", ErrInvalidID, s)
	}
	hexText := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(id[:], []byte(hexText)); err != nil {
		return NilID, fmt.Errorf("%w: %q", ErrInvalidID, s)
	}
	return id, nil
}

// String returns the canonical lower-case form.
func (id ID) String() string {
	var buf [36]byte
	id.encode(buf[:])
	return string(buf[:])
}

func (id ID) encode(dst []byte) {
	hex.Encode(dst[0:8], id[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], id[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], id[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], id[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], id[10:])
}

// MarshalText writes the canonical form, so IDs travel as strings in JSON,
// including Temporal payloads.
func (id ID) MarshalText() ([]byte, error) {
	buf := make([]byte, 36)
	id.encode(buf)
	return buf, nil
}

// UnmarshalText reads the canonical form.
func (id *ID) UnmarshalText(b []byte) error {
	parsed, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// Value stores the canonical form in a uuid column (database/sql's Valuer,
// which pgx honours).
func (id ID) Value() (driver.Value, error) {
	return id.String(), nil
}

// Scan reads a uuid column as pgx and database/sql hand it over: text or
// 16 raw bytes.
func (id *ID) Scan(src any) error {
	switch v := src.(type) {
	case string:
		return id.UnmarshalText([]byte(v))
	case []byte:
		if len(v) == len(id) {
			copy(id[:], v)
			return nil
		}
		return id.UnmarshalText(v)
	case [16]byte:
		*id = v
		return nil
	default:
		return fmt.Errorf("%w: cannot scan %T", ErrInvalidID, src)
	}
}
