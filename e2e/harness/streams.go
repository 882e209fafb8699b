package harness

import (
	"strconv"
	"strings"
)

// LastID is the id of the last event of an event stream's text, 0 for
// none.
func LastID(body string) int64 {
	var last int64
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			last, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return last
}
