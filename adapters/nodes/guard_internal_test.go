package nodes

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestRestrictionNamesEveryRefusedAddressClass(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ addr, rule string }{
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"10.0.0.1", "private (RFC 1918)"},
		{"172.16.5.4", "private (RFC 1918)"},
		{"172.31.255.255", "private (RFC 1918)"},
		{"192.168.1.1", "private (RFC 1918)"},
		{"fc00::1", "unique-local (fc00::/7)"},
		{"fd12:3456::1", "unique-local (fc00::/7)"},
		{"169.254.169.254", "link-local"},
		{"169.254.0.1", "link-local"},
		{"fe80::1", "link-local"},
		{"100.64.0.1", "shared address space (CGNAT, 100.64.0.0/10)"},
		{"100.127.255.254", "shared address space (CGNAT, 100.64.0.0/10)"},
		{"224.0.0.1", "link-local"},
		{"239.1.2.3", "multicast"},
		{"ff02::1", "link-local"},
		{"ff05::1", "multicast"},
		{"ff01::1", "multicast"},
		{"255.255.255.255", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		// IPv4-mapped and NAT64 forms are judged by the address they carry.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:10.1.2.3", "private (RFC 1918)"},
		{"::ffff:100.64.1.1", "shared address space (CGNAT, 100.64.0.0/10)"},
		{"64:ff9b::a9fe:a9fe", "link-local"},
		{"64:ff9b::7f00:1", "loopback"},
		// Public addresses pass.
		{"8.8.8.8", ""},
		{"100.128.0.1", ""},
		{"172.32.0.1", ""},
		{"2606:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
	} {
		if got := restriction(netip.MustParseAddr(tt.addr)); got != tt.rule {
			t.Errorf("restriction(%s) = %q, want %q", tt.addr, got, tt.rule)
		}
	}
}

func TestGuardAllowList(t *testing.T) {
	t.Parallel()
	allow, err := ParseAllowList(" 10.1.0.0/16, ::1/128,192.168.7.7 , billing.internal, ")
	if err != nil {
		t.Fatal(err)
	}
	g := guard{allow: allow}
	for _, tt := range []struct {
		host, addr string
		ok         bool
	}{
		{"", "10.1.200.3", true},
		{"", "::ffff:10.1.0.1", true},
		{"", "10.2.0.1", false},
		{"", "::1", true},
		{"", "127.0.0.1", false},
		{"", "192.168.7.7", true},
		{"", "192.168.7.8", false},
		{"billing.internal", "10.9.9.9", true},
		{"BILLING.internal.", "169.254.169.254", true},
		{"other.internal", "10.9.9.9", false},
		{"example.com", "93.184.216.34", true},
	} {
		err := g.check(tt.host, netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("check(%q, %s) = %v, want allowed=%v", tt.host, tt.addr, err, tt.ok)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "not a host!", "a..b"} {
		if _, err := ParseAllowList(bad); err == nil {
			t.Errorf("ParseAllowList(%q) accepted it", bad)
		}
	}
}

func TestRefusedErrorNamesTheRuleAndTheSetting(t *testing.T) {
	t.Parallel()
	err := guard{}.check("", netip.MustParseAddr("169.254.169.254"))
	if want := "refused: 169.254.169.254 is link-local; allow it with SLUICE_HTTP_NODE_ALLOW"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	err = guard{}.check("metadata.internal", netip.MustParseAddr("169.254.169.254"))
	if want := "refused: metadata.internal (169.254.169.254) is link-local; allow it with SLUICE_HTTP_NODE_ALLOW"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestClientIgnoresProxyEnvironmentUnlessConfigured(t *testing.T) {
	t.Parallel()
	if p := NewHTTPRequest(DefaultConfig()).client.Transport.(*http.Transport).Proxy; p != nil {
		t.Error("the default client has a proxy function: HTTP_PROXY and the like would be honoured")
	}
}
