package nodes

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/domain"
)

// Environment variables that set Config, named in the errors that the limits
// cause so that an operator reading a node record knows which knob it is.
const (
	EnvTemplateBudget       = "SLUICE_NODE_TEMPLATE_BUDGET"
	EnvResponseBodyMax      = "SLUICE_HTTP_NODE_RESPONSE_MAX"
	EnvResponseHeadersMax   = "SLUICE_HTTP_NODE_HEADERS_MAX"
	EnvAllow                = "SLUICE_HTTP_NODE_ALLOW"
	EnvProxy                = "SLUICE_HTTP_NODE_PROXY"
	defaultResponseBodyMax  = 1 << 20
	defaultResponseHeadsMax = 64 << 10
)

// MaxRedirects is how many redirects an HTTP_REQUEST node follows; the next
// one fails the node.
const MaxRedirects = 5

// Config bounds what the node executors may produce and reach. Every tenant
// shares the worker, so each bound is enforced before the memory is spent
// or the connection is made, and a node that meets one fails with an error
// that names it. A node's output is bounded once, by the engine's payload
// limit (SLUICE_ENGINE_PAYLOAD_LIMIT), where it is handed to Temporal.
type Config struct {
	// TemplateBudget is the number of bytes one node's templates may produce
	// when resolved (see domain.TemplateBudget).
	TemplateBudget int
	// ResponseBodyMax bounds the body an HTTP_REQUEST node reads. A larger
	// body fails the node; it is never cut.
	ResponseBodyMax int64
	// ResponseHeadersMax bounds the bytes of an HTTP_REQUEST response's
	// header section.
	ResponseHeadersMax int64
	// Allow opens addresses the network guard refuses by default.
	Allow AllowList
	// Proxy, when set, carries every HTTP_REQUEST. Proxy variables of the
	// environment (HTTP_PROXY and the like) are ignored: a proxy reached
	// that way could reach what the guard refuses.
	Proxy *url.URL
	// Resolver looks up host names for HTTP_REQUEST nodes; nil uses the
	// system's. The guard checks the addresses it returns, whoever answers.
	Resolver *net.Resolver
}

// DefaultConfig is the configuration of the binary when nothing is set:
// every private and local address is refused.
func DefaultConfig() Config {
	return Config{
		TemplateBudget:     domain.DefaultTemplateBudget,
		ResponseBodyMax:    defaultResponseBodyMax,
		ResponseHeadersMax: defaultResponseHeadsMax,
	}
}

// withDefaults fills the zero limits with DefaultConfig's.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.TemplateBudget <= 0 {
		c.TemplateBudget = d.TemplateBudget
	}
	if c.ResponseBodyMax <= 0 {
		c.ResponseBodyMax = d.ResponseBodyMax
	}
	if c.ResponseHeadersMax <= 0 {
		c.ResponseHeadersMax = d.ResponseHeadersMax
	}
	return c
}

// AllowList names the private or local targets HTTP_REQUEST nodes may reach
// anyway: address ranges, and host names whose resolved addresses are then
// all accepted. The zero value allows nothing.
type AllowList struct {
	prefixes []netip.Prefix
	hosts    map[string]bool
}

// ParseAllowList reads a comma-separated list of CIDR prefixes
// ("10.1.0.0/16", "::1/128"), single addresses ("10.1.2.3") and host names
// ("billing.internal", matched exactly, without case). Empty items are
// ignored, so "" allows nothing.
func ParseAllowList(s string) (AllowList, error) {
	var a AllowList
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return AllowList{}, fmt.Errorf("%q is not a CIDR prefix: %w", item, err)
			}
			a.prefixes = append(a.prefixes, p.Masked())
		default:
			if ip, err := netip.ParseAddr(item); err == nil {
				a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			name := strings.ToLower(strings.TrimSuffix(item, "."))
			if !validHostName(name) {
				return AllowList{}, fmt.Errorf("%q is neither an address, a CIDR prefix nor a host name", item)
			}
			if a.hosts == nil {
				a.hosts = map[string]bool{}
			}
			a.hosts[name] = true
		}
	}
	return a, nil
}

// validHostName accepts letters, digits, '-' and '.' separated labels.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allowsHost reports whether host (as written in a URL) is listed.
func (a AllowList) allowsHost(host string) bool {
	return a.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// allowsAddr reports whether ip, or the IPv4 address it maps, is listed.
func (a AllowList) allowsAddr(ip netip.Addr) bool {
	for _, p := range a.prefixes {
		if p.Contains(ip) || p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}
