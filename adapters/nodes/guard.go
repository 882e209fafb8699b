package nodes

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// RefusedError is an HTTP_REQUEST target the network guard refused: an
// address of the service's own network, which a tenant must not reach.
type RefusedError struct {
	// Host is the host name or address the request named.
	Host string
	// Addr is the address it resolved to.
	Addr netip.Addr
	// Rule names the class of address, such as "link-local".
	Rule string
	// Port is set when the port, not the address, is refused.
	Port string
}

// Error names the target, its rule and the setting that opens it. A
// target named by host name is not shown with the address it resolved
// to: that would hand the tenant the service's internal DNS answers.
func (e *RefusedError) Error() string {
	target := e.Addr.String()
	if e.Host != "" && e.Host != target {
		target = e.Host
	}
	if e.Port != "" {
		return fmt.Sprintf("refused: port %s of %s is outside the ports HTTP_REQUEST reaches (%s); allow the host with %s", e.Port, target, allowedPorts, EnvAllow)
	}
	if target != e.Addr.String() {
		return fmt.Sprintf("refused: %s resolves to an address that is %s; allow it with %s", target, e.Rule, EnvAllow)
	}
	return fmt.Sprintf("refused: %s is %s; allow it with %s", target, e.Rule, EnvAllow)
}

// allowedPorts is the port policy: the web's ports and the unprivileged
// range. Ports below 1024 are the services of the host itself (SSH, SMTP,
// DNS, LDAP, ...), which a tenant's request has no business reaching.
const allowedPorts = "80, 443 and 1024-65535"

// portAllowed reports whether port (decimal, "" for the scheme's default)
// is within allowedPorts.
func portAllowed(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && (n == 80 || n == 443 || n >= 1024 && n <= 65535)
}

var (
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
	// nat64 embeds an IPv4 address in its last 32 bits (RFC 6052).
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// localNAT64 is the local-use NAT64 prefix (RFC 8215), translated by
	// the operator's own gateway, possibly into its private networks.
	localNAT64 = netip.MustParsePrefix("64:ff9b:1::/48")
	// v4Compatible embeds an IPv4 address in its last 32 bits (the
	// deprecated ::a.b.c.d form, RFC 4291).
	v4Compatible = netip.MustParsePrefix("::/96")
	// sixToFour embeds an IPv4 address in bits 16 to 48 (RFC 3056).
	sixToFour = netip.MustParsePrefix("2002::/16")
	reserved  = netip.MustParsePrefix("240.0.0.0/4")
	benchmark = netip.MustParsePrefix("198.18.0.0/15")
)

// restriction names the rule that refuses ip, or "" for a public address.
// IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64
// (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::) forms are judged by the
// IPv4 address they carry; the local-use NAT64 prefix is refused whole.
func restriction(ip netip.Addr) string {
	b := ip.As16()
	switch {
	case ip.Is4In6():
		return restriction(ip.Unmap())
	case nat64.Contains(ip):
		return restriction(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case ip.Is6() && v4Compatible.Contains(ip) && !ip.IsUnspecified() && !ip.IsLoopback():
		return restriction(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case sixToFour.Contains(ip):
		return restriction(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	case localNAT64.Contains(ip):
		return "local-use NAT64 (64:ff9b:1::/48)"
	case reserved.Contains(ip) && ip != broadcast:
		return "reserved (240.0.0.0/4)"
	case benchmark.Contains(ip):
		return "benchmarking (198.18.0.0/15)"
	}
	switch {
	case ip.IsUnspecified() || ip.Is4() && thisNetwork.Contains(ip):
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsPrivate() && ip.Is4():
		return "private (RFC 1918)"
	case ip.IsPrivate():
		return "unique-local (fc00::/7)"
	case cgnat.Contains(ip):
		return "shared address space (CGNAT, 100.64.0.0/10)"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || ip == broadcast:
		return "multicast"
	}
	return specialPurpose(ip)
}

// specialPurpose names the IANA special-purpose block that holds ip, or ""
// if none does. The named rules above cover the blocks an attacker aims
// at most; this catches the rest of the registries (IETF protocol
// assignments such as 192.0.0.0/24, documentation, AS112, deprecated
// site-local fec0::/10 and everything else outside IPv6 global unicast),
// from code.dny.dev/ssrf, whose lists are generated from IANA's registries
// rather than kept by hand.
func specialPurpose(ip netip.Addr) string {
	if ip.Is4() {
		for _, p := range ssrf.IPv4DeniedPrefixes {
			if p.Contains(ip) {
				return "special-purpose (IANA, " + p.String() + ")"
			}
		}
		return ""
	}
	if !ssrf.IPv6GlobalUnicast.Contains(ip) {
		return "outside IPv6 global unicast (2000::/3)"
	}
	for _, p := range ssrf.IPv6DeniedPrefixes {
		if p.Contains(ip) {
			return "special-purpose (IANA, " + p.String() + ")"
		}
	}
	return ""
}

// guard decides which addresses HTTP_REQUEST nodes may connect to.
type guard struct {
	allow AllowList
	// proxyHost is the configured proxy's host, always allowed: the
	// operator chose it.
	proxyHost string
}

// check refuses ip unless it is public or allowed, by address or by the
// host name the request used.
func (g guard) check(host string, ip netip.Addr) error {
	rule := restriction(ip)
	if rule == "" || g.allowed(host, ip) {
		return nil
	}
	return &RefusedError{Host: host, Addr: ip, Rule: rule}
}

// allowed reports whether the operator opened the target: its address or
// the host name it was reached by is on the allow list, or it is the
// proxy.
func (g guard) allowed(host string, ip netip.Addr) bool {
	return ip.IsValid() && g.allow.allowsAddr(ip) || host != "" && (g.allow.allowsHost(host) || host == g.proxyHost)
}

// checkPort refuses a port outside allowedPorts unless the target is
// allowed (ip is the zero Addr for a name not yet resolved).
func (g guard) checkPort(host string, ip netip.Addr, port string) error {
	if portAllowed(port) || g.allowed(host, ip) {
		return nil
	}
	return &RefusedError{Host: host, Addr: ip, Port: port}
}

// checkURL checks a request's URL before any connection: an address
// written in it, and its port. Names are checked once resolved, in the
// dialer.
func (g guard) checkURL(u *url.URL) error {
	host := u.Hostname()
	ip, err := netip.ParseAddr(host)
	if err == nil {
		if err := g.check("", ip); err != nil {
			return err
		}
		host = ""
	}
	return g.checkPort(host, ip, u.Port())
}

// dialHostKey carries the host name being dialled to the dialer's control
// hook, which otherwise sees only the resolved address.
type dialHostKey struct{}

// dialContext dials through d after noting the host name for control.
func (g guard) dialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return d.DialContext(context.WithValue(ctx, dialHostKey{}, host), network, addr)
	}
}

// control runs after DNS resolution and before each connection attempt, for
// every address tried, redirects and reused names included, so a name that
// changes its answer between lookups (DNS rebinding) is still checked on the
// address actually used.
func (g guard) control(ctx context.Context, _, address string, _ syscall.RawConn) error {
	h, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return fmt.Errorf("refused: cannot check address %q", h)
	}
	host, _ := ctx.Value(dialHostKey{}).(string)
	ip = ip.WithZone("")
	if err := g.check(host, ip); err != nil {
		return err
	}
	_, p, _ := net.SplitHostPort(address)
	return g.checkPort(host, ip, p)
}

// newDialer returns a dialer whose every connection passes the guard.
func (g guard) newDialer(resolver *net.Resolver) *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver, ControlContext: g.control}
}
