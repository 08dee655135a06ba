// Package site derives, from a request, the names the edge answers under:
// the Host with the listener's port, the scheme the client used, the URL
// as the client sent it (before the host rewrote its path), and the
// identifiers built from them (audiences, did:web, the RFC 9728 document's
// URL). Every step that publishes or checks such a name asks a Site, so
// that all of them agree.
package site

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// Site is the view of requests given the host's hooks. The zero value
// takes requests as sent and trusts no proxy. Safe for concurrent use.
type Site struct {
	original     func(r *http.Request) (string, *url.URL)
	trustedProxy func(r *http.Request) bool
}

// New builds a Site. original returns the method and URL of the request
// as the client sent it (nil URL: r is as sent); trustedProxy reports that
// r came through a proxy the host trusts, whose X-Forwarded-Proto then
// names the scheme. Either may be nil.
func New(original func(r *http.Request) (string, *url.URL), trustedProxy func(r *http.Request) bool) *Site {
	return &Site{original: original, trustedProxy: trustedProxy}
}

func (s *Site) viaTrustedProxy(r *http.Request) bool {
	return s.trustedProxy != nil && s.trustedProxy(r)
}

// Original is the method and URL of r as the client sent it.
func (s *Site) Original(r *http.Request) (string, *url.URL) {
	if s.original != nil {
		if m, u := s.original(r); u != nil {
			return m, u
		}
	}
	return r.Method, r.URL
}

// Scheme is the scheme the client used: https when the connection is TLS,
// or when a proxy the host trusts terminated TLS and says so in
// X-Forwarded-Proto. The URLs the edge publishes must name the scheme
// clients reach it at, not the hop behind a load balancer.
func (s *Site) Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if s.viaTrustedProxy(r) {
		// The first value is what the outermost proxy saw from the client.
		proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
		if strings.EqualFold(strings.TrimSpace(proto), "https") {
			return "https"
		}
	}
	return "http"
}

// Origin is scheme://host as the client reached the edge.
func (s *Site) Origin(r *http.Request) string {
	return s.Scheme(r) + "://" + s.Host(r)
}

// PathPrefix is the part of the original request path that earlier
// handlers (handle_path, uri strip_prefix) removed, so that the endpoints
// the edge advertises are the ones clients must use.
func (s *Site) PathPrefix(r *http.Request) string {
	_, orig := s.Original(r)
	if orig == nil || r.URL == nil {
		return ""
	}
	op, cp := orig.Path, r.URL.Path
	if len(op) > len(cp) && strings.HasSuffix(op, cp) {
		return strings.TrimSuffix(op[:len(op)-len(cp)], "/")
	}
	return ""
}

// WellKnownResource is the path of the RFC 9728 protected resource
// metadata document.
const WellKnownResource = "/.well-known/oauth-protected-resource"

// IsResourceMetadataPath matches the document for the whole host and the
// per-path form /.well-known/oauth-protected-resource/<path> (RFC 9728 §3.1).
func IsResourceMetadataPath(p string) bool {
	return p == WellKnownResource || strings.HasPrefix(p, WellKnownResource+"/")
}

// ResourceMetadataURL is the RFC 9728 document for the URL requested: the
// per-path form (RFC 9728 §3.1), whose resource is that URL, as §3.3
// requires; the site-wide one for a request to the root.
func (s *Site) ResourceMetadataURL(r *http.Request) string {
	_, u := s.Original(r)
	p := u.Path
	if p == "/" {
		p = ""
	}
	return s.Origin(r) + WellKnownResource + p
}

// Audiences are the names a credential may use for this host:
// did:web:<host> (the port's colon is %3A-encoded, as did:web requires),
// https://<host> and <host>. Hosts are case-insensitive, so lower-cased.
func Audiences(host string) []string {
	host = strings.ToLower(host)
	return []string{DIDWeb(host), "https://" + host, host}
}

// DIDWeb is did:web of host, the first of its Audiences.
func DIDWeb(host string) string {
	return "did:web:" + strings.ReplaceAll(strings.ToLower(host), ":", "%3A")
}

// LastDerived keeps the last string derived from a request's host, so
// that a route serving one host derives it once rather than on every
// request; another host replaces it. Safe for concurrent use.
type LastDerived struct{ p atomic.Pointer[[2]string] } // host, derived

// Get returns derive(host), from the last call when it was for host.
func (l *LastDerived) Get(host string, derive func(string) string) string {
	if v := l.p.Load(); v != nil && v[0] == host {
		return v[1]
	}
	v := &[2]string{host, derive(host)}
	l.p.Store(v)
	return v[1]
}
