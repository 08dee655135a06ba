package handshake

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"/rpc":                    "/rpc",
		"/rpc?x=1":                "/rpc?x=1",
		"https://up.example/rpc":  "https://up.example/rpc",
		"http://up.example:81/hs": "http://up.example:81/hs",
	} {
		e, err := ParseEndpoint(in)
		if err != nil || e.String() != want {
			t.Errorf("ParseEndpoint(%q) = %v, %v", in, e, err)
		}
	}
	for _, in := range []string{"rpc", "", "ftp://up.example/x", "//up.example/x", "https://"} {
		if e, err := ParseEndpoint(in); err == nil {
			t.Errorf("ParseEndpoint(%q) = %v, want an error", in, e)
		}
	}
}

func TestDocumentEndpoints(t *testing.T) {
	origin, _ := url.Parse("https://up.example" + WellKnownPath)
	for _, tc := range []struct {
		name   string
		doc    string
		base   *url.URL
		hs, vf string // "" when the document names no usable endpoints
	}{
		{"paths through the route", `{"mcp_i":{"endpoints":{"handshake":"/rpc/hs","verify":"/rpc/vf"}}}`, nil, "/rpc/hs", "/rpc/vf"},
		{"relative to the document", `{"mcp_i":{"endpoints":{"handshake":"hs"}}}`, nil, "/.well-known/hs", "/.well-known/hs"},
		{"verify defaults to handshake", `{"mcp_i":{"endpoints":{"handshake":"/rpc"}}}`, nil, "/rpc", "/rpc"},
		{"absolute against an origin", `{"mcp_i":{"endpoints":{"handshake":"/hs"}}}`, origin, "https://up.example/hs", "https://up.example/hs"},
		{"another origin stays absolute", `{"mcp_i":{"endpoints":{"handshake":"https://other.example/hs"}}}`, nil, "https://other.example/hs", "https://other.example/hs"},
		{"no handshake", `{"mcp_i":{"endpoints":{"verify":"/vf"}}}`, nil, "", ""},
		{"bad scheme", `{"mcp_i":{"endpoints":{"handshake":"ftp://up.example/hs"}}}`, nil, "", ""},
		{"bad verify", `{"mcp_i":{"endpoints":{"handshake":"/hs","verify":"ftp://x/y"}}}`, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ParseDocument([]byte(tc.doc))
			if d == nil {
				t.Fatal("document not read")
			}
			eps := d.endpoints(tc.base, "well-known")
			if tc.hs == "" {
				if eps != nil {
					t.Fatalf("endpoints %v %v, want none", eps.Handshake, eps.Verify)
				}
				return
			}
			if eps == nil || eps.Handshake.String() != tc.hs || eps.Verify.String() != tc.vf {
				t.Fatalf("endpoints %+v, want %s %s", eps, tc.hs, tc.vf)
			}
		})
	}
}

func TestParseDocumentMalformed(t *testing.T) {
	for _, in := range []string{"", "null x", "[", `{"mcp_i":[]}`, `{"mcp_i":{"endpoints":{"handshake":1}}}`, "\xff"} {
		if d := ParseDocument([]byte(in)); d != nil && d.endpoints(nil, "x") != nil {
			t.Errorf("ParseDocument(%q) gave endpoints", in)
		}
	}
}

func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(`{"mcp_i":{"endpoints":{"handshake":"/rpc","verify":"https://up.example/v"}}}`))
	f.Add([]byte(`{"mcp_i":{"endpoints":{"handshake":"//x/y"}}}`))
	base, _ := url.Parse("https://up.example" + WellKnownPath)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := ParseDocument(data)
		if d == nil {
			return
		}
		for _, b := range []*url.URL{nil, base} {
			eps := d.endpoints(b, "x")
			if eps == nil {
				continue
			}
			for _, e := range []Endpoint{eps.Handshake, eps.Verify} {
				if e.abs == nil && (len(e.path) == 0 || e.path[0] != '/') {
					t.Fatalf("endpoint %q is neither a URL nor an absolute path", e)
				}
				if e.abs != nil && e.abs.Scheme != "http" && e.abs.Scheme != "https" {
					t.Fatalf("endpoint %q has scheme %q", e, e.abs.Scheme)
				}
			}
		}
	})
}

// Through the route, each Host has its own discovery, cached for the TTL.
func TestDiscoveryPerHost(t *testing.T) {
	var fetched atomic.Int32
	next := func(w http.ResponseWriter, r *http.Request) error {
		fetched.Add(1)
		if r.URL.Path != WellKnownPath || r.Header.Get("Authorization") != "" {
			t.Errorf("discovery sent %s with %v", r.URL.Path, r.Header)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"mcp_i":{"endpoints":{"handshake":"/` + r.Host + `/hs"}}}`))
		return nil
	}
	dv := &Discovery{Default: Endpoints{Handshake: PathEndpoint("/d/hs"), Verify: PathEndpoint("/d/vf")}, TTL: time.Minute, Logger: zap.NewNop()}
	get := func(host string) *Endpoints {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Host = host
		r.Header.Set("Authorization", "Bearer secret")
		return dv.Endpoints(r, host, next)
	}
	for range 2 {
		if eps := get("a.example"); eps.Handshake.String() != "/a.example/hs" || eps.Source != "well-known" {
			t.Fatalf("a: %v %s", eps.Handshake, eps.Source)
		}
		if eps := get("b.example"); eps.Handshake.String() != "/b.example/hs" {
			t.Fatalf("b: %v", eps.Handshake)
		}
	}
	if n := fetched.Load(); n != 2 {
		t.Errorf("fetched %d times, want once per Host", n)
	}
}

// A route without a document: the edge's own paths, and the failure is
// not cached for the full TTL when it may pass.
func TestDiscoveryDefaults(t *testing.T) {
	next := func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusBadGateway)
		return nil
	}
	dv := &Discovery{Default: Endpoints{Handshake: PathEndpoint("/d/hs"), Verify: PathEndpoint("/d/vf")}, TTL: time.Hour, Logger: zap.NewNop()}
	eps, ttl := dv.discover(httptest.NewRequest(http.MethodPost, "/mcp", nil), next)
	if eps.Source != "default" || eps.Handshake.String() != "/d/hs" || eps.Verify.String() != "/d/vf" {
		t.Errorf("endpoints %+v", eps)
	}
	if ttl != discoveryRetry {
		t.Errorf("cached for %v after a 502, want %v", ttl, discoveryRetry)
	}
}
