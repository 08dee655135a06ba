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

func TestGuardedServer(t *testing.T) {
	user, agent := newParty(t), newParty(t)
	srv, err := newServer([]string{user.did})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
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
