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
		// IPv4-compatible (deprecated ::a.b.c.d) and 6to4 forms too, and
		// the local-use NAT64 prefix whole.
		{"::127.0.0.1", "loopback"},
		{"::a9fe:a9fe", "link-local"},
		{"::10.0.0.1", "private (RFC 1918)"},
		{"2002:a9fe:a9fe::1", "link-local"},
		{"2002:7f00:1::", "loopback"},
		{"2002:c0a8:101::5", "private (RFC 1918)"},
		{"64:ff9b:1::a9fe:a9fe", "local-use NAT64 (64:ff9b:1::/48)"},
		{"64:ff9b:1:ffff::8.8.8.8", "local-use NAT64 (64:ff9b:1::/48)"},
		// Reserved and benchmarking ranges.
		{"240.0.0.1", "reserved (240.0.0.0/4)"},
		{"255.255.255.254", "reserved (240.0.0.0/4)"},
		{"198.18.0.1", "benchmarking (198.18.0.0/15)"},
		{"198.19.255.255", "benchmarking (198.18.0.0/15)"},
		// The rest of IANA's special-purpose registries, named by block.
		{"192.0.0.8", "special-purpose (IANA, 192.0.0.0/24)"},
		{"192.0.2.1", "special-purpose (IANA, 192.0.2.0/24)"},
		{"203.0.113.7", "special-purpose (IANA, 203.0.113.0/24)"},
		{"192.88.99.1", "special-purpose (IANA, 192.88.99.0/24)"},
		{"fec0::1", "outside IPv6 global unicast (2000::/3)"},
		{"fec0:0:0:ffff::1", "outside IPv6 global unicast (2000::/3)"},
		{"100::1", "outside IPv6 global unicast (2000::/3)"},
		{"2001:db8::1", "special-purpose (IANA, 2001:db8::/32)"},
		{"2001::1", "special-purpose (IANA, 2001::/23)"},
		{"3fff::1", "special-purpose (IANA, 3fff::/20)"},
		// Public addresses pass.
		{"8.8.8.8", ""},
		{"100.128.0.1", ""},
		{"172.32.0.1", ""},
		{"2606:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"2002:808:808::1", ""},
		{"198.20.0.1", ""},
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
	// A name is refused without the address it resolved to: the service's
	// internal DNS answers are not the tenant's to read.
	if want := "refused: metadata.internal resolves to an address that is link-local; allow it with SLUICE_HTTP_NODE_ALLOW"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	err = guard{}.checkPort("smtp.example.com", netip.Addr{}, "25")
	if want := "refused: port 25 of smtp.example.com is outside the ports HTTP_REQUEST reaches (80, 443 and 1024-65535); allow the host with SLUICE_HTTP_NODE_ALLOW"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestPortPolicyAllowsTheWebsPortsAndTheUnprivilegedRange(t *testing.T) {
	t.Parallel()
	for port, ok := range map[string]bool{"": true, "80": true, "443": true, "1024": true, "8080": true, "65535": true,
		"22": false, "25": false, "0": false, "53": false, "389": false, "1023": false, "65536": false, "x": false} {
		if got := portAllowed(port); got != ok {
			t.Errorf("portAllowed(%q) = %v, want %v", port, got, ok)
		}
	}
	allow, err := ParseAllowList("mail.internal,10.0.0.25")
	if err != nil {
		t.Fatal(err)
	}
	g := guard{allow: allow}
	if g.checkPort("mail.internal", netip.Addr{}, "25") != nil || g.checkPort("", netip.MustParseAddr("10.0.0.25"), "25") != nil {
		t.Error("an allowed target's port was refused")
	}
}

func TestClientIgnoresProxyEnvironmentUnlessConfigured(t *testing.T) {
	t.Parallel()
	if p := NewHTTPRequest(DefaultConfig()).client.Transport.(*http.Transport).Proxy; p != nil {
		t.Error("the default client has a proxy function: HTTP_PROXY and the like would be honoured")
	}
}
