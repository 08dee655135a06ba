package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUpstreamCounts: the per-route counters the harness checks every
// configuration against, from what each request carried.
func TestUpstreamCounts(t *testing.T) {
	srv := httptest.NewServer(&upstreamServer{routes: make(map[string]*routeCounters)})
	defer srv.Close()
	const (
		plain = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet"}}`
		proof = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","_meta":{"org.kya-os/request-proof":{"jws":"x"}}}}`
		token = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","delegationToken":"t"}}`
	)
	framed := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
	sends := []struct {
		route, body string
		headers     map[string]string
	}{
		{"b", plain, nil},
		{"b", plain, map[string]string{"Authorization": "Bearer t"}},
		{"b", token, map[string]string{"X-Verified-Delegation": "v"}},
		{"b-2026", plain, framed},
		{"b-2026", plain, map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call"}},
		{"b-2026", plain, map[string]string{"MCP-Protocol-Version": "2026-07-28"}},
		{"p", proof, framed},
		{"p", proof, nil}, // a proof without framing is not counted as proved
		{"p", plain, framed},
	}
	for _, s := range sends {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/"+s.route+"/mcp", strings.NewReader(s.body))
		for k, v := range s.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", s.route, resp.StatusCode)
		}
	}
	resp, err := http.Get(srv.URL + "/__stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]RouteStats
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]RouteStats{
		"b":      {Requests: 3, Leaked: 2, Asserted: 1},
		"b-2026": {Requests: 3, Framed: 1},
		"p":      {Requests: 3, Framed: 2, Proved: 1},
	}
	for route, w := range want {
		if got[route] != w {
			t.Errorf("%s: got %+v, want %+v", route, got[route], w)
		}
	}
}
