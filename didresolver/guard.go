package didresolver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// The SSRF guard checks the address actually dialled, after DNS resolution,
// so a name that resolves (or re-resolves) to an internal address is refused
// just the same as an IP literal.

// refusedPrefixes are special-purpose ranges (RFC 6890 and successors) that
// the netip predicates used in refusedAddr do not already cover.
var refusedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, Teredo
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

var (
	nat64Prefix   = netip.MustParsePrefix("64:ff9b::/96")
	sixToFourPrfx = netip.MustParsePrefix("2002::/16")
)

// refusedAddr reports whether did:web may not connect to a.
func refusedAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.Unmap().WithZone("")
	if a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range refusedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	// Translation prefixes carry an IPv4 address that a gateway will reach.
	if a.Is6() {
		b := a.As16()
		if nat64Prefix.Contains(a) {
			return refusedAddr(netip.AddrFrom4([4]byte(b[12:16])))
		}
		if sixToFourPrfx.Contains(a) {
			return refusedAddr(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return false
}

func checkDialAddress(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || refusedAddr(ap.Addr()) {
		return fmt.Errorf("%w: did:web host resolves to a loopback, private or reserved address", ErrForbiddenAddress)
	}
	return nil
}

// guardControl runs after name resolution and before connect, for every
// address tried.
func guardControl(_, address string, _ syscall.RawConn) error {
	return checkDialAddress(address)
}

func newDialer(guard bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if guard {
		d.Control = guardControl
	}
	return d
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// guardDial wraps a caller-supplied dial function we cannot give a Control
// hook to. It checks the peer after connecting and closes the connection
// before anything is sent.
func guardDial(inner dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := inner(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ra := conn.RemoteAddr()
		if ra == nil {
			conn.Close()
			return nil, fmt.Errorf("%w: cannot tell the peer address of the connection", ErrForbiddenAddress)
		}
		if err := checkDialAddress(ra.String()); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// newTransport is the transport used when the caller gives no client.
// Proxies are not used: the guard would check the proxy's address, not the
// did:web host's.
func newTransport(guard bool) *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            newDialer(guard).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// guardTransport returns a copy of a caller's transport with every dial
// path guarded. Only *http.Transport can be inspected; any other
// RoundTripper could connect anywhere, so it is refused.
func guardTransport(rt http.RoundTripper) (*http.Transport, error) {
	if rt == nil {
		return newTransport(true), nil
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("%w: the HTTP client's transport (%T) cannot be guarded against private addresses; use an *http.Transport or WithAllowPrivateAddresses", ErrForbiddenAddress, rt)
	}
	// The deprecated hooks are looked at only because they would bypass a
	// guarded DialContext.
	//lint:ignore SA1019 read only to refuse a transport whose old hooks would bypass the guard
	if t.Dial != nil || t.DialTLS != nil {
		return nil, fmt.Errorf("%w: the HTTP client's transport uses deprecated Dial hooks that cannot be guarded", ErrForbiddenAddress)
	}
	c := t.Clone()
	c.Proxy = nil
	if c.DialContext == nil {
		c.DialContext = newDialer(true).DialContext
	} else {
		c.DialContext = guardDial(c.DialContext)
	}
	if c.DialTLSContext != nil {
		c.DialTLSContext = guardDial(c.DialTLSContext)
	}
	return c, nil
}
