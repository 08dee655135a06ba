package site

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// onListener makes r look as if it came in on a listener at port.
func onListener(r *http.Request, port int) *http.Request {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
}

func TestHost(t *testing.T) {
	for _, tt := range []struct {
		host     string
		listener int // 0: not known
		tls      bool
		trusted  bool // through a trusted proxy
		want     string
	}{
		{host: "a.test:8081", listener: 8081, want: "a.test:8081"},
		{host: "A.Test:8081", listener: 8081, want: "a.test:8081"},
		{host: "a.test:9443", listener: 8081, want: "a.test:8081"},  // the client's port does not count
		{host: "a.test", listener: 8081, want: "a.test:8081"},       // nor its leaving it off
		{host: "a.test:08081", listener: 8081, want: "a.test:8081"}, // one spelling of a port
		{host: "a.test:+8081", listener: 8081, want: "a.test:8081"},
		{host: "a.test:x", listener: 8081, want: "a.test:8081"},
		{host: "a.test:", listener: 8081, want: "a.test:8081"},
		{host: "[::1]:9443", listener: 8081, want: "[::1]:8081"},
		{host: "[::1]", listener: 8081, want: "[::1]:8081"},
		{host: "a.test", listener: 80, want: "a.test"},             // the scheme's default port
		{host: "a.test", listener: 443, tls: true, want: "a.test"}, // likewise
		{host: "a.test", listener: 443, want: "a.test:443"},        // plain http on 443
		{host: "a.test", listener: 8080, trusted: true, want: "a.test"},
		{host: "a.test:443", listener: 8080, trusted: true, want: "a.test:443"},
		{host: "a.test:9443", want: "a.test:9443"}, // listener not known: as sent
		{host: "XN--BCHER-KVA.test:1", listener: 1, want: "xn--bcher-kva.test:1"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.Host = tt.host
		if tt.listener != 0 {
			r = onListener(r, tt.listener)
		}
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if tt.trusted {
			r.Header.Set("Test-Trusted", "1")
		}
		s := New(nil, func(r *http.Request) bool { return r.Header.Get("Test-Trusted") == "1" })
		if got := s.Host(r); got != tt.want {
			t.Errorf("Host(Host %q, listener %d, tls %t, trusted %t) = %q, want %q",
				tt.host, tt.listener, tt.tls, tt.trusted, got, tt.want)
		}
	}
}

// The URLs the edge publishes name the scheme the client used: behind a
// trusted proxy that terminated TLS, X-Forwarded-Proto says https; from an
// untrusted peer the header is ignored.
func TestScheme(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tls     bool
		trusted bool
		proto   string
		want    string
	}{
		{name: "tls", tls: true, want: "https"},
		{name: "plain", want: "http"},
		{name: "trusted proxy says https", trusted: true, proto: "https", want: "https"},
		{name: "trusted proxy, list", trusted: true, proto: "HTTPS, http", want: "https"},
		{name: "trusted proxy says http", trusted: true, proto: "http", want: "http"},
		{name: "untrusted peer says https", proto: "https", want: "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://"+"mcp.example.com"+"/mcp", nil)
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if tc.trusted {
				r.Header.Set("Test-Trusted", "1")
			}
			s := New(nil, func(r *http.Request) bool { return r.Header.Get("Test-Trusted") == "1" })
			if got := s.Scheme(r); got != tc.want {
				t.Errorf("Scheme = %s, want %s", got, tc.want)
			}
			if got, want := s.ResourceMetadataURL(r), tc.want+"://"+"mcp.example.com"+"/.well-known/oauth-protected-resource/mcp"; got != want {
				t.Errorf("ResourceMetadataURL = %s, want %s", got, want)
			}
		})
	}
}

func TestAudiences(t *testing.T) {
	got := Audiences("MCP.Example.com:8443")
	want := []string{"did:web:mcp.example.com%3A8443", "https://mcp.example.com:8443", "mcp.example.com:8443"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Audiences = %q", got)
	}
}

// LastDerived derives again for another host, and for the first one
// after it.
func TestLastDerived(t *testing.T) {
	var l LastDerived
	calls := 0
	derive := func(h string) string { calls++; return "d:" + h }
	for i, tc := range []struct{ host, want string }{
		{"a", "d:a"}, {"a", "d:a"}, {"b", "d:b"}, {"a", "d:a"}, {"", "d:"},
	} {
		if got := l.Get(tc.host, derive); got != tc.want {
			t.Errorf("request %d for %q: %q, want %q", i, tc.host, got, tc.want)
		}
	}
	if calls != 4 {
		t.Errorf("derived %d times, want 4 (the repeat of a kept)", calls)
	}
}
