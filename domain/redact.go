package domain

import (
	"net/url"
	"strings"
)

// Redacted replaces a secret wherever Sluice stores or shows a value it
// cannot know to be public: node records, node errors and logs.
const Redacted = "[redacted]"

// sensitiveHeaderWords are the parts of a header name that mark its value
// as a credential. "auth" covers Authorization, Proxy-Authorization and
// custom names such as X-Auth-User.
var sensitiveHeaderWords = []string{"auth", "cookie", "token", "secret", "key", "password"}

// SensitiveHeader reports whether a header's value is a credential:
// Authorization, Proxy-Authorization, Cookie and Set-Cookie, and any name
// containing auth, token, secret, key or password, in any case. Such values
// are redacted wherever they are recorded, and an HTTP_REQUEST node drops
// them when a redirect leaves the request's origin.
func SensitiveHeader(name string) bool {
	name = strings.ToLower(name)
	for _, w := range sensitiveHeaderWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// RedactHeaders returns a copy of headers with the value of every
// SensitiveHeader replaced by Redacted. nil stays nil.
func RedactHeaders(headers map[string]string) map[string]string {
	if headers == nil {
		return nil
	}
	out := make(map[string]string, len(headers))
	for k, v := range headers {
		if SensitiveHeader(k) {
			v = Redacted
		}
		out[k] = v
	}
	return out
}

// RedactURL returns raw with its user-info, every query value and its
// fragment replaced by Redacted; scheme, host, path and query names stay,
// so the URL still says where a request went. A value that does not parse
// as a URL cannot be taken apart safely and is redacted whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	if u.User == nil && u.RawQuery == "" && u.Fragment == "" && !strings.ContainsAny(raw, "?#") {
		return raw
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme)
		b.WriteByte(':')
	}
	if u.Opaque != "" {
		// "mailto:user@host?x": no host part to keep.
		b.WriteString(Redacted)
		return b.String()
	}
	if u.Host != "" || u.User != nil {
		b.WriteString("//")
		if u.User != nil {
			b.WriteString(Redacted)
			b.WriteByte('@')
		}
		b.WriteString(u.Host)
	}
	b.WriteString(u.EscapedPath())
	if u.ForceQuery || u.RawQuery != "" {
		b.WriteByte('?')
		for i, pair := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			name, _, hasValue := strings.Cut(pair, "=")
			b.WriteString(name)
			if hasValue {
				b.WriteString("=" + Redacted)
			}
		}
	}
	if u.Fragment != "" || strings.HasSuffix(raw, "#") {
		b.WriteString("#" + Redacted)
	}
	return b.String()
}

// RedactURLsIn returns text with every occurrence of each of the raw URLs
// replaced by its RedactURL form, for error text from libraries that quote
// the URL they were given.
func RedactURLsIn(text string, rawURLs ...string) string {
	for _, raw := range rawURLs {
		if raw == "" {
			continue
		}
		if red := RedactURL(raw); red != raw {
			text = strings.ReplaceAll(text, raw, red)
		}
	}
	return text
}
