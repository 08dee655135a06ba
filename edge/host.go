package edge

import (
	"net"
	"net/http"
	"strconv"
	"strings"
)

// serviceHost is the name the edge answers r under, for every identifier
// it derives from the request (audiences, its own did:web DID, the URLs it
// publishes, per-Host caches): the Host, lower-cased, with the port of the
// listener that took the connection in place of a different one the client
// wrote. Host matchers (Caddy's among them) ignore the port, so a port the
// client chose must not choose which credentials count: at a site on
// a.test:8081, "Host: a.test:9443" still derives a.test:8081. A Host
// without a port is kept as it is (behind a proxy the listener's port is
// not the public one), as is any Host when the listener is not known.
func serviceHost(r *http.Request) string {
	host := r.Host
	if hasUpper(host) {
		host = strings.ToLower(host)
	}
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.HasSuffix(host, "]") { // no port (a bare IPv6 literal ends in "]")
		return host
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok || local.Port == 0 {
		return host
	}
	if p, err := strconv.Atoi(host[i+1:]); err == nil && p == local.Port {
		return host
	}
	return host[:i+1] + strconv.Itoa(local.Port)
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' || c >= 0x80 {
			return true
		}
	}
	return false
}
