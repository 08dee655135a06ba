package edge

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
)

// TestProxyThroughRoute: handshake proxy with the endpoints discovered from
// the upstream's mcp-i.json, fetched and forwarded through next (the route's
// reverse_proxy).
func TestProxyThroughRoute(t *testing.T) {
	f := newFixture(t)
	up := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
	up.docPaths = map[string]string{"handshake": "/rpc/hs", "verify": "../rpc/vf"} // relative to the document
	next := up.handler()
	h := f.l3Handler(t, func(c *setup) { c.Handshake = HandshakeProxy })
	cred := f.jwt(t, nil)

	// Handshake: discovered, forwarded, relayed, recorded at the edge.
	body, _ := json.Marshal(handshakeMsg(1, f.agent.did))
	r := newRequest(http.MethodPost, defaultHandshakePath, string(body))
	r.Header.Set("X-Agent-DID", "did:key:forged")
	r.Header.Set("Accept-Encoding", "gzip")
	rec, _ := l3Serve(t, h, r, next)
	got := up.drain()
	if len(got) != 2 || got[0].Path != wellknown.WellKnownMCPI || got[1].Path != "/rpc/hs" || string(got[1].Body) != string(body) {
		t.Fatalf("upstream got %+v", got)
	}
	if got[1].Header.Get("X-Agent-Did") != "" {
		t.Error("forged identity header reached the upstream")
	}
	var rep rpcReply
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("handshake answer: %d %s", rec.Code, rec.Body)
	}
	var hr challenge.HandshakeResult
	if err := json.Unmarshal(rep.Result, &hr); err != nil || !strings.HasPrefix(hr.Challenge, "a0b1c2d3e4f5") || !strings.HasPrefix(hr.Nonce, "6789012345") {
		t.Fatalf("relayed result %s", rep.Result)
	}

	// Verify: checked at the edge, then forwarded with the Level 2 headers.
	sc := answer(t, f.agent, hr)
	vbody, _ := json.Marshal(verifyMsg(2, sc, cred))
	rec, _ = l3Serve(t, h, newRequest(http.MethodPost, defaultVerifyPath, string(vbody)), next)
	if rec.Code != http.StatusOK || rec.Header().Get("X-Upstream") != "verify" || !strings.Contains(rec.Body.String(), "upstream-session") {
		t.Fatalf("verify answer not the upstream's: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	got = up.drain()
	if len(got) != 1 || got[0].Path != "/rpc/vf" || string(got[0].Body) != string(vbody) {
		t.Fatalf("upstream got %+v", got)
	}
	if v := got[0].Header.Get("X-Agent-Did"); v != f.agent.did {
		t.Errorf("forwarded verify: X-Agent-DID %q, want %q (Level 2 headers)", v, f.agent.did)
	}
	if v := got[0].Header.Get("X-User-Did"); v != f.user.did {
		t.Errorf("forwarded verify: X-User-DID %q", v)
	}
	if got[0].Header.Get("X-Verified-Delegation") == "" {
		t.Error("forwarded verify: no X-Verified-Delegation")
	}

	// The edge holds the upstream's challenge to single use, and checks
	// the proof, before the upstream sees anything.
	rep = rpcCall(t, h, defaultVerifyPath, verifyMsg(3, sc, cred), next)
	if rep.code() != challenge.CodeReplay || len(up.drain()) != 0 {
		t.Fatalf("replay: %s", rep.Raw)
	}
	hr = doHandshake(t, h, defaultHandshakePath, f.agent, next)
	if got := up.drain(); len(got) != 1 {
		t.Errorf("discovery not cached: upstream got %d requests", len(got))
	}
	bad := answer(t, newParty(t), hr)
	bad.AgentDID = f.agent.did
	rep = rpcCall(t, h, defaultVerifyPath, verifyMsg(4, bad, cred), next)
	if rep.code() != challenge.CodeBadProof || len(up.drain()) != 0 {
		t.Fatalf("bad proof: %s", rep.Raw)
	}
	never := answer(t, f.agent, challenge.HandshakeResult{Challenge: "a0b1", Nonce: "not-from-upstream"})
	rep = rpcCall(t, h, defaultVerifyPath, verifyMsg(5, never, cred), next)
	if rep.code() != challenge.CodeReplay || len(up.drain()) != 0 {
		t.Fatalf("unrecorded challenge: %s", rep.Raw)
	}
	// The real answer still works after the bad ones.
	rep = rpcCall(t, h, defaultVerifyPath, verifyMsg(6, answer(t, f.agent, hr), cred), next)
	if rep.Error != nil || !rep.Next {
		t.Fatalf("verify: %s", rep.Raw)
	}

	// The upstream's session is bound at the edge: later requests present
	// only it (proxysession_test.go has the details).
	r = newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set(handshake.HeaderSession, "upstream-session")
	if res := serve(t, h, r); !res.called || res.fwd.Header.Get(handshake.HeaderSession) != "upstream-session" {
		t.Errorf("request on the bound upstream session: called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
	}
}

// TestProxyUpstreamAnswers: what the upstream's handshake answer can be.
func TestProxyUpstreamAnswers(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, func(c *setup) { c.Handshake, c.HandshakeEndpoint = HandshakeProxy, "/rpc" })
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   int // JSON-RPC code the agent gets; 0: the upstream's answer
	}{
		{"JSON-RPC error relayed", 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"nope"}}`, 0},
		{"HTTP error relayed", 500, `oops`, 0},
		{"not JSON", 200, `<html>`, challenge.CodeInternalError},
		{"no nonce", 200, `{"jsonrpc":"2.0","id":1,"result":{"challenge":"abc"}}`, challenge.CodeInternalError},
		{"bad nonce", 200, `{"jsonrpc":"2.0","id":1,"result":{"challenge":"abc","nonce":"has space"}}`, challenge.CodeInternalError},
		{"nonce names a replay record", 200, `{"jsonrpc":"2.0","id":1,"result":{"challenge":"abc","nonce":"vp:0f1e2d3c"}}`, challenge.CodeInternalError},
		{"too large", 200, `{"jsonrpc":"2.0","id":1,"result":{"challenge":"` + strings.Repeat("a", handshake.MaxResponse) + `","nonce":"n"}}`, challenge.CodeInternalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := Next(func(w http.ResponseWriter, r *http.Request) error {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
				return nil
			})
			body, _ := json.Marshal(handshakeMsg(1, f.agent.did))
			rec, _ := l3Serve(t, h, newRequest(http.MethodPost, defaultHandshakePath, string(body)), next)
			if tc.want == 0 {
				if rec.Code != tc.status || rec.Body.String() != tc.body {
					t.Fatalf("not relayed: %d %s", rec.Code, rec.Body)
				}
				return
			}
			var rep rpcReply
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rep.code() != tc.want || rec.Code != http.StatusOK {
				t.Fatalf("HTTP %d %s, want code %d", rec.Code, rec.Body, tc.want)
			}
		})
	}

	// The nonce store is down: the upstream's challenge cannot be held to
	// single use, so the agent does not get it.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()
	down := f.l3Handler(t, func(c *setup) {
		c.Handshake, c.HandshakeEndpoint = HandshakeProxy, "/rpc"
		useStore(redisStore(t, dead, 0), "redis")(c)
	})
	up := newFakeUpstream(t, "/rpc", "/rpc")
	rep := rpcCall(t, down, defaultHandshakePath, handshakeMsg(1, f.agent.did), up.handler())
	if rep.Status != http.StatusServiceUnavailable || rep.code() != challenge.CodeStoreUnavailable {
		t.Fatalf("store down: HTTP %d %s", rep.Status, rep.Raw)
	}
}

// TestProxyOtherOrigin: endpoints on another origin are forwarded by the
// edge's own client, never through next.
func TestProxyOtherOrigin(t *testing.T) {
	f := newFixture(t)
	up := newFakeUpstream(t, "/hs", "/vf")
	srv := httptest.NewServer(up)
	defer srv.Close()
	h := f.l3Handler(t, func(c *setup) {
		c.Handshake, c.HandshakeEndpoint, c.VerifyEndpoint = HandshakeProxy, srv.URL+"/hs", srv.URL+"/vf"
	})
	hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, answer(t, f.agent, hr), f.jwt(t, nil)), nil)
	if rep.Error != nil || rep.Next || rep.Header.Get("X-Upstream") != "verify" {
		t.Fatalf("verify: next=%t %s", rep.Next, rep.Raw)
	}
	got := up.drain()
	if len(got) != 2 || got[0].Path != "/hs" || got[1].Path != "/vf" {
		t.Fatalf("upstream got %+v", got)
	}
	if got[1].Header.Get("X-Agent-Did") != f.agent.did || got[1].Header.Get("X-Forwarded-Host") != testHost {
		t.Errorf("verify headers %v", got[1].Header)
	}
}

// TestProxyDiscoveryDID: no mcp-i.json; the endpoints come from the
// upstream DID document's mcp-i service.
func TestProxyDiscoveryDID(t *testing.T) {
	f := newFixture(t)
	up := newFakeUpstream(t, "/x/handshake", "/x/verify")
	var did string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/did.json" {
			w.Header().Set("Content-Type", "application/did+json")
			fmt.Fprintf(w, `{"@context":["https://www.w3.org/ns/did/v1"],"id":%q,"service":[
				{"id":"%s#linked","type":"LinkedDomains","serviceEndpoint":"https://example.com"},
				{"id":"%s#hs","type":"mcp-i","serviceEndpoint":"http://%s/x/handshake"},
				{"id":"%s#verify","type":["JSON-RPC"],"serviceEndpoint":["http://%s/x/verify"]}]}`,
				did, did, did, r.Host, did, r.Host)
			return
		}
		up.ServeHTTP(w, r)
	}))
	defer srv.Close()
	did = "did:web:" + strings.ReplaceAll(srv.Listener.Addr().String(), ":", "%3A")
	h := f.l3Handler(t, func(c *setup) {
		c.Handshake, c.UpstreamDID, c.AllowPrivateDIDWeb = HandshakeProxy, did, true
	})
	route := newFakeUpstream(t, "/unused", "/unused") // no mcp-i.json there
	hr := doHandshake(t, h, defaultHandshakePath, f.agent, route.handler())
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, answer(t, f.agent, hr), f.jwt(t, nil)), route.handler())
	if rep.Error != nil || rep.Header.Get("X-Upstream") != "verify" {
		t.Fatalf("verify: %s", rep.Raw)
	}
	if got := route.drain(); len(got) != 1 || got[0].Path != wellknown.WellKnownMCPI {
		t.Errorf("route got %+v, want only the mcp-i.json probe", got)
	}
	got := up.drain()
	if len(got) != 2 || got[0].Path != "/x/handshake" || got[1].Path != "/x/verify" {
		t.Fatalf("upstream got %+v", got)
	}
}

// TestProxyDiscoveryUpstreamOrigin: with Level 2's upstream origin set, the
// mcp-i.json is fetched from it, and endpoints on that origin are reached
// through the route like any request to it.
func TestProxyDiscoveryUpstreamOrigin(t *testing.T) {
	f := newFixture(t)
	origin := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
	srv := httptest.NewServer(origin)
	defer srv.Close()
	origin.docPaths = map[string]string{"handshake": "/rpc/hs", "verify": srv.URL + "/rpc/vf"}
	route := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
	h := f.l3Handler(t, func(c *setup) { c.Handshake, c.Upstream = HandshakeProxy, srv.URL })

	hr := doHandshake(t, h, defaultHandshakePath, f.agent, route.handler())
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, answer(t, f.agent, hr), f.jwt(t, nil)), route.handler())
	if rep.Error != nil || !rep.Next {
		t.Fatalf("verify: %s", rep.Raw)
	}
	if got := origin.drain(); len(got) != 1 || got[0].Path != wellknown.WellKnownMCPI {
		t.Errorf("origin got %+v, want only the mcp-i.json", got)
	}
	if got := route.drain(); len(got) != 2 || got[0].Path != "/rpc/hs" || got[1].Path != "/rpc/vf" {
		t.Errorf("route got %+v", got)
	}
}
