package nodes

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
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
}

// Error names the address, its rule and the setting that opens it.
func (e *RefusedError) Error() string {
	target := e.Addr.String()
	if e.Host != "" && e.Host != target {
		target = e.Host + " (" + target + ")"
	}
	return fmt.Sprintf("refused: %s is %s; allow it with %s", target, e.Rule, EnvAllow)
}

var (
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
	// nat64 embeds an IPv4 address in its last 32 bits (RFC 6052).
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// restriction names the rule that refuses ip, or "" for a public address.
// IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) forms are judged
// by the IPv4 address they carry.
func restriction(ip netip.Addr) string {
	if ip.Is4In6() {
		return restriction(ip.Unmap())
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		return restriction(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
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
	if rule == "" || g.allow.allowsAddr(ip) || host != "" && (g.allow.allowsHost(host) || host == g.proxyHost) {
		return nil
	}
	return &RefusedError{Host: host, Addr: ip, Rule: rule}
}

// checkLiteral checks a URL host that is an address, before any connection;
// names are checked once resolved, in the dialer.
func (g guard) checkLiteral(host string) error {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	return g.check("", ip)
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
	return g.check(host, ip.WithZone(""))
}

// newDialer returns a dialer whose every connection passes the guard.
func (g guard) newDialer(resolver *net.Resolver) *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver, ControlContext: g.control}
}
