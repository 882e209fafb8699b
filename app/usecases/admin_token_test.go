package usecases

import (
	"strings"
	"testing"
)

func TestIsAdminTokenMatchesTheAdminTokenOnly(t *testing.T) {
	t.Parallel()
	const admin = "admin-token-0123456789"
	cases := []struct {
		name         string
		token, admin string
		want         bool
	}{
		{"TheToken", admin, admin, true},
		{"APrefix", admin[:len(admin)-1], admin, false},
		{"Longer", admin + "x", admin, false},
		{"OtherCase", strings.ToUpper(admin), admin, false},
		{"Empty", "", admin, false},
		{"NoAdminMatchesNothing", "", "", false},
		{"NoAdminMatchesNoToken", admin, "", false},
	}
	for _, c := range cases {
		if got := IsAdminToken(c.token, c.admin); got != c.want {
			t.Errorf("%s: IsAdminToken(%q, %q) = %v, want %v", c.name, c.token, c.admin, got, c.want)
		}
	}
}
