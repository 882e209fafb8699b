package domain

import (
	"reflect"
	"testing"
)

func TestSensitiveHeader(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "Cookie": true, "Set-Cookie": true,
		"X-Api-Key": true, "X-Auth-Token": true, "X-Client-Secret": true, "X-PASSWORD": true, "Private-Token": true,
		"Content-Type": false, "Accept": false, "X-Request-Id": false, "User-Agent": false,
	} {
		if got := SensitiveHeader(name); got != want {
			t.Errorf("SensitiveHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRedactHeaders(t *testing.T) {
	t.Parallel()
	in := map[string]string{"Authorization": "Bearer s3cr3t", "X-Api-Key": "k", "Accept": "application/json"}
	got := RedactHeaders(in)
	want := map[string]string{"Authorization": Redacted, "X-Api-Key": Redacted, "Accept": "application/json"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RedactHeaders = %v, want %v", got, want)
	}
	if in["Authorization"] != "Bearer s3cr3t" {
		t.Error("RedactHeaders changed its argument")
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"https://api.example.com/v1/users", "https://api.example.com/v1/users"},
		{"https://u:p@api.example.com/x", "https://[redacted]@api.example.com/x"},
		{"https://api.example.com/x?token=abc&page=2&flag", "https://api.example.com/x?token=[redacted]&page=[redacted]&flag"},
		{"http://h/x#access_token=abc", "http://h/x#[redacted]"},
		{"http://h/a%20b?q=1", "http://h/a%20b?q=[redacted]"},
		{"http://[::1]:8080/?k=v", "http://[::1]:8080/?k=[redacted]"},
		{"http://h/\x7f?x=1", Redacted},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactURLsIn(t *testing.T) {
	t.Parallel()
	got := RedactURLsIn(`Get "https://h/x?key=s3cr3t": EOF`, "https://h/x?key=s3cr3t")
	if want := `Get "https://h/x?key=[redacted]": EOF`; got != want {
		t.Errorf("RedactURLsIn = %q, want %q", got, want)
	}
}
