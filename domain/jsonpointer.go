package domain

import "strings"

// JSONPointerToken escapes one reference token of a JSON pointer (RFC
// 6901): "~" becomes "~0" and "/" becomes "~1". Every problem path Sluice
// reports is built from such tokens.
func JSONPointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
