package main

import (
	"context"
	"crypto"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// party is a did:key with its private key.
type party struct {
	priv     crypto.PrivateKey
	did, kid string
}

func newParty(t *testing.T) party {
	t.Helper()
	priv, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := didresolver.PublicKeyOf(priv)
	if err != nil {
		t.Fatal(err)
	}
	did, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return party{priv, did, kid}
}

// headerRT adds h to every request, as an agent's HTTP client would.
type headerRT struct {
	h http.Header
}

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP session through the guarded server with hdr on
// every request.
func connect(t *testing.T, url string, hdr http.Header) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "example-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: headerRT{h: hdr}},
	}, nil)
}

// startServer serves the guarded server on a loopback port, accepting
// the audiences main gives it for that address and trusting what trust
// returns for its base URL.
func startServer(t *testing.T, trust func(base string) []string) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	addr := ts.Listener.Addr().String()
	srv, err := newServer(trust("http://"+addr), localAudiences(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts.Config.Handler = srv
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// whoami calls the whoami tool with tok through an MCP client.
func whoami(t *testing.T, url, tok string) (whoamiOutput, error) {
	t.Helper()
	cs, err := connect(t, url, http.Header{"Authorization": {"Bearer " + tok}})
	if err != nil {
		return whoamiOutput{}, err
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		return whoamiOutput{}, err
	}
	var out whoamiOutput
	b, _ := json.Marshal(res.StructuredContent)
	err = json.Unmarshal(b, &out)
	return out, err
}

func TestGuardedServer(t *testing.T) {
	user, agent := newParty(t), newParty(t)
	ts := startServer(t, func(string) []string { return []string{user.did} })
	url := ts.URL + "/mcp"

	t.Run("no credential: 401, nothing reaches the server", func(t *testing.T) {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != http.StatusUnauthorized || body.Error != "invalid_token" ||
			!strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata") {
			t.Fatalf("got %d %+v %q, want 401 invalid_token with a resource_metadata challenge",
				resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
		}
		if _, err := connect(t, url, nil); err == nil {
			t.Fatal("an MCP client without a credential connected")
		}
	})

	t.Run("valid delegation: the tool answers with the edge's identity, never the client's", func(t *testing.T) {
		tok, err := vc.IssueJWT(user.priv, user.kid, vc.Template{
			AgentDID: agent.did, UserDID: user.did, ExpiresAt: time.Now().Add(time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		hdr := http.Header{
			"Authorization": {"Bearer " + tok},
			// A client's own identity headers are lies; the edge replaces them.
			"X-Agent-Did": {"did:web:spoofed.example"},
			"X-User-Did":  {"did:web:spoofed.example"},
			// No reputation source is configured: the edge sets none, and
			// must not let the client's through.
			"X-Agent-Reputation-Score": {"100"},
		}
		cs, err := connect(t, url, hdr)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
		if err != nil {
			t.Fatal(err)
		}
		var out whoamiOutput
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if out.AgentDID != agent.did || out.UserDID != user.did || out.Reputation != "" {
			t.Fatalf("the server saw agent %q user %q reputation %q, want %q, %q and none",
				out.AgentDID, out.UserDID, out.Reputation, agent.did, user.did)
		}
	})

	t.Run("the 401's resource_metadata URL answers the metadata", func(t *testing.T) {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		_, meta, ok := strings.Cut(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`)
		meta, _, _ = strings.Cut(meta, `"`)
		if !ok || !strings.HasPrefix(meta, ts.URL+"/") {
			t.Fatalf("WWW-Authenticate %q names no metadata URL of this server", resp.Header.Get("WWW-Authenticate"))
		}
		mresp, err := http.Get(meta)
		if err != nil {
			t.Fatal(err)
		}
		defer mresp.Body.Close()
		var doc struct {
			Resource string `json:"resource"`
		}
		// RFC 9728 §3.3: the document names the very URL requested.
		if err := json.NewDecoder(mresp.Body).Decode(&doc); mresp.StatusCode != http.StatusOK || err != nil || doc.Resource != ts.URL+"/mcp" {
			t.Fatalf("GET %s: %d %+v (%v), want 200 with resource %q", meta, mresp.StatusCode, doc, err, ts.URL+"/mcp")
		}
	})

	t.Run("a delegation for the http:// URL the client calls is accepted", func(t *testing.T) {
		_, port, _ := strings.Cut(strings.TrimPrefix(ts.URL, "http://"), ":")
		for _, aud := range []string{ts.URL, "http://localhost:" + port} {
			tok, err := vc.IssueJWT(user.priv, user.kid, vc.Template{
				AgentDID: agent.did, UserDID: user.did, Audience: []string{aud}, ExpiresAt: time.Now().Add(time.Hour),
			})
			if err != nil {
				t.Fatal(err)
			}
			if out, err := whoami(t, url, tok); err != nil || out.AgentDID != agent.did {
				t.Errorf("audience %s: %+v, %v; want the agent to reach whoami", aud, out, err)
			}
		}
		tok, err := vc.IssueJWT(user.priv, user.kid, vc.Template{
			AgentDID: agent.did, UserDID: user.did, Audience: []string{"http://other.example"}, ExpiresAt: time.Now().Add(time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := whoami(t, url, tok); err == nil {
			t.Error("a delegation for another audience reached whoami")
		}
	})

	t.Run("untrusted issuer: refused", func(t *testing.T) {
		mallory := newParty(t)
		tok, err := vc.IssueJWT(mallory.priv, mallory.kid, vc.Template{AgentDID: agent.did, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := connect(t, url, http.Header{"Authorization": {"Bearer " + tok}}); err == nil {
			t.Fatal("a delegation from an untrusted issuer connected")
		}
	})
}

// TestDemoDelegation: run without -trust, the server trusts the demo user
// it made and the delegation it prints gets the demo agent through.
func TestDemoDelegation(t *testing.T) {
	var did, tok string
	ts := startServer(t, func(base string) []string {
		var err error
		if did, tok, err = demoDelegation(base); err != nil {
			t.Fatal(err)
		}
		return []string{did}
	})
	out, err := whoami(t, ts.URL+"/mcp", tok)
	if err != nil || out.UserDID != did || out.AgentDID == "" {
		t.Fatalf("whoami with the demo delegation: %+v, %v; want user %s", out, err, did)
	}
}
