package edge

import (
	"encoding/json"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Endpoint discovery through the route must not let one client's Host, or
// a document naming another origin, choose where every agent's handshake
// goes: the discovered endpoints are shared by all agents of the route.
// Calls to another origin carry none of the client's own headers.

// hostUpstream answers /.well-known/mcp-i.json by Host (docs[host], else
// 404) and records every request, as a catch-all upstream that answers
// per Host does.
func hostUpstream(t *testing.T, docs map[string]map[string]string) *fakeUpstream {
	up := newFakeUpstream(t, defaultHandshakePath, defaultVerifyPath)
	up.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != wellknown.WellKnownMCPI {
			return false
		}
		up.reqs <- recordedReq{Path: r.URL.Path, Header: r.Header.Clone()}
		eps, ok := docs[r.Host]
		if !ok {
			http.NotFound(w, r)
			return true
		}
		doc, _ := json.Marshal(map[string]any{"mcp_i": map[string]any{"version": "2.0.0", "endpoints": eps}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
		return true
	}
	return up
}

// handshakeAs runs a handshake call with Host host through h.
func handshakeAs(t *testing.T, h *Handler, host string, next Next) rpcReply {
	t.Helper()
	body, _ := json.Marshal(handshakeMsg(1, newParty(t).did))
	r := newRequest(http.MethodPost, defaultHandshakePath, string(body))
	r.Host = host
	rec, called := l3Serve(t, h, r, next)
	rep := rpcReply{Status: rec.Code, Raw: rec.Body.Bytes(), Next: called}
	_ = json.Unmarshal(rec.Body.Bytes(), &rep)
	return rep
}

func TestDiscoveryByHost(t *testing.T) {
	f := newFixture(t)
	attacker := newFakeUpstream(t, "/rpc", "/rpc")
	evil := httptest.NewServer(attacker)
	defer evil.Close()
	route := hostUpstream(t, map[string]map[string]string{
		// The attacker's Host: a document naming the attacker's origin.
		"evil.test": {"handshake": evil.URL + "/rpc", "verify": evil.URL + "/rpc"},
		// Another Host whose document names paths of its own.
		"other.test": {"handshake": "/other/hs"},
	})
	h := f.l3Handler(t, func(c *setup) { c.Handshake = HandshakeProxy })

	// The attacker's handshake: the foreign origin is refused, the call
	// goes to the default path on the route's upstream.
	if rep := handshakeAs(t, h, "evil.test", route.handler()); rep.Error != nil || rep.Status != http.StatusOK {
		t.Fatalf("handshake with Host evil.test: HTTP %d %s", rep.Status, rep.Raw)
	}
	if got := attacker.drain(); len(got) != 0 {
		t.Fatalf("the attacker's origin received %d calls: %+v", len(got), got)
	}
	if got := route.drain(); len(got) != 2 || got[1].Path != defaultHandshakePath {
		t.Fatalf("route got %+v, want the document and the default handshake path", got)
	}

	// A document of one Host does not choose another Host's endpoints.
	handshakeAs(t, h, "other.test", route.handler())
	if got := route.drain(); len(got) != 2 || got[1].Path != "/other/hs" {
		t.Fatalf("route got %+v for other.test, want its own /other/hs", got)
	}
	if rep := handshakeAs(t, h, testHost, route.handler()); rep.Status != http.StatusOK {
		t.Fatalf("handshake: HTTP %d %s", rep.Status, rep.Raw)
	}
	if got := route.drain(); len(got) != 2 || got[1].Path != defaultHandshakePath {
		t.Fatalf("route got %+v for %s, want the default path, not another Host's", got, testHost)
	}
	if got := attacker.drain(); len(got) != 0 {
		t.Fatalf("the attacker's origin received %+v", got)
	}
}

// TestOtherOriginHeaders: a call to an operator-named endpoint on
// another origin carries what a JSON-RPC call needs and the edge's identity
// headers, never the client's cookies or tokens.
func TestOtherOriginHeaders(t *testing.T) {
	f := newFixture(t)
	up := newFakeUpstream(t, "/hs", "/vf")
	srv := httptest.NewServer(up)
	defer srv.Close()
	h := f.l3Handler(t, func(c *setup) {
		c.Handshake, c.HandshakeEndpoint, c.VerifyEndpoint = HandshakeProxy, srv.URL+"/hs", srv.URL+"/vf"
	})
	body, _ := json.Marshal(handshakeMsg(1, f.agent.did))
	r := newRequest(http.MethodPost, defaultHandshakePath, string(body))
	r.Header.Set("Cookie", "session=secret")
	r.Header.Set("X-Api-Key", "secret")
	r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if rec, _ := l3Serve(t, h, r, nil); rec.Code != http.StatusOK {
		t.Fatalf("handshake: %d %s", rec.Code, rec.Body)
	}
	got := up.drain()
	if len(got) != 1 {
		t.Fatalf("upstream got %+v", got)
	}
	hdr := got[0].Header
	if hdr.Get("Cookie") != "" || hdr.Get("X-Api-Key") != "" {
		t.Errorf("client headers reached another origin: %v", hdr)
	}
	if hdr.Get("Mcp-Protocol-Version") != "2025-11-25" || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("JSON-RPC headers lost: %v", hdr)
	}
}
