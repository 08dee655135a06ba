package site

import (
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Host is the name the edge answers r under, for every identifier
// it derives from the request (audiences, its own did:web DID, the URLs it
// publishes, per-Host caches): the Host, lower-cased, with the port of the
// listener that took the connection. Host matchers (Caddy's among them)
// ignore the port, so a port the client wrote, or left off, must not choose
// which credentials count: at a site on a.test:8081, "Host: a.test:9443" and
// "Host: a.test" both derive a.test:8081, and "a.test:08081" is spelt
// a.test:8081. A Host without a port stays so on the scheme's default port,
// and a request through a proxy the host trusts keeps the Host the proxy
// forwarded (the listener's port is not the public one there), as does any
// request whose listener is not known.
func (s *Site) Host(r *http.Request) string {
	return serviceHost(r, s.viaTrustedProxy(r))
}

func serviceHost(r *http.Request, viaTrustedProxy bool) string {
	host := r.Host
	if hasUpper(host) {
		host = strings.ToLower(host)
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if viaTrustedProxy || !ok || local.Port == 0 {
		return host
	}
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.HasSuffix(host, "]") { // no port (a bare IPv6 literal ends in "]")
		defaultPort := 80
		if r.TLS != nil {
			defaultPort = 443
		}
		if local.Port == defaultPort {
			return host
		}
		return host + ":" + strconv.Itoa(local.Port)
	}
	if portIs(host[i+1:], local.Port) {
		return host
	}
	return host[:i+1] + strconv.Itoa(local.Port)
}

// portIs reports whether s is port in its one canonical spelling: decimal
// digits, no sign, no leading zero.
func portIs(s string, port int) bool {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n == port
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' || c >= 0x80 {
			return true
		}
	}
	return false
}
