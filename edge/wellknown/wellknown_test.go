package wellknown

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/site"
)

func TestServices(t *testing.T) {
	d := &Documents{Site: site.New(nil, nil), Handshake: &Handshake{HandshakePath: "/api/mcp/handshake", VerifyPath: "/api/mcp/verify"}}
	r := httptest.NewRequest(http.MethodGet, "http://mcp.example.com/.well-known/did.json", nil)
	svcs := d.Services(r, "did:web:mcp.example.com")
	if len(svcs) != 1 {
		t.Fatalf("services %+v", svcs)
	}
	s := svcs[0]
	ep, _ := s.ServiceEndpoint.(map[string]string)
	if s.ID != "did:web:mcp.example.com#mcp-i" || s.Type != "mcp-i" ||
		ep["handshake"] != "http://mcp.example.com/api/mcp/handshake" || ep["verify"] != "http://mcp.example.com/api/mcp/verify" {
		t.Errorf("service %+v", s)
	}
	if got := (&Documents{Site: site.New(nil, nil)}).Services(r, "did:web:x"); got != nil {
		t.Errorf("services without a handshake %+v", got)
	}
}

// The resource of the per-path document is the URL it was fetched for
// (RFC 9728 §3.3); the front door adds the edge as authorization server.
func TestResourceMetadata(t *testing.T) {
	for _, tc := range []struct {
		name, path, resource string
		front                bool
		servers              []string
	}{
		{"site-wide", "/.well-known/oauth-protected-resource", "http://a.test", false, []string{"https://as.example"}},
		{"per path", "/.well-known/oauth-protected-resource/mcp", "http://a.test/mcp", false, []string{"https://as.example"}},
		{"front door", "/.well-known/oauth-protected-resource/mcp", "http://a.test/mcp", true, []string{"http://a.test", "https://as.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Documents{Site: site.New(nil, nil), Resource: Resource{Level: 2, AuthorizationServers: []string{"https://as.example"}}}
			if tc.front {
				d.Resource.FrontDoorScopes = func() []string { return []string{"echo:execute"} }
			}
			w := httptest.NewRecorder()
			handled, err := d.Serve(w, httptest.NewRequest(http.MethodGet, "http://a.test"+tc.path, nil))
			if !handled || err != nil || w.Code != http.StatusOK {
				t.Fatalf("Serve = %t, %v, %d", handled, err, w.Code)
			}
			var doc resourceMetadata
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Resource != tc.resource || len(doc.MCPILevelsSupported) != 2 || len(doc.AuthorizationServers) != len(tc.servers) ||
				doc.AuthorizationServers[0] != tc.servers[0] || (tc.front != (len(doc.ScopesSupported) == 1)) {
				t.Errorf("document %s", w.Body)
			}
			if w.Header().Get("Vary") != "Host" {
				t.Errorf("Vary %q", w.Header().Get("Vary"))
			}
		})
	}
}

// Documents the configuration does not call for are left to the upstream.
func TestServeLeavesOthers(t *testing.T) {
	d := &Documents{Site: site.New(nil, nil)}
	for _, p := range []string{WellKnownMCP, WellKnownMCPI, "/.well-known/did.json", "/mcp"} {
		w := httptest.NewRecorder()
		if handled, _ := d.Serve(w, httptest.NewRequest(http.MethodGet, "http://a.test"+p, nil)); handled {
			t.Errorf("%s served", p)
		}
	}
	w := httptest.NewRecorder()
	if handled, _ := d.Serve(w, httptest.NewRequest(http.MethodPost, "http://a.test/.well-known/oauth-protected-resource", nil)); handled {
		t.Error("POST of the resource document served")
	}
}

func TestClockSkewSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 30}, {10 * time.Second, 30}, {60 * time.Second, 60}, {time.Hour, 600}} {
		if got := ClockSkewSeconds(tc.d); got != tc.want {
			t.Errorf("ClockSkewSeconds(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
