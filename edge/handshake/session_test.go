package handshake

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func testSessions(t testing.TB) *Sessions {
	t.Helper()
	key, err := DeriveKey(bytes.Repeat([]byte{7}, SessionKeySize), "policy")
	if err != nil {
		t.Fatal(err)
	}
	return NewSessions(key, 15*time.Minute)
}

func testDelegation() *vc.Delegation {
	return &vc.Delegation{
		AgentDID: "did:web:agent.example.com", UserDID: "did:web:user.example.com",
		Issuer: "did:web:user.example.com", RootIssuer: "did:web:user.example.com",
		RootAgentDID: "did:web:orchestrator.example.com",
		Scopes:       []string{"tools:read"}, Format: vc.FormatJWTVC11, Hash: [32]byte{1, 2, 3},
		ExpiresAt: time.Now().Add(time.Hour),
	}
}

// A session stands for the delegation it was issued for, never outlives
// it, and holds the agent to its proof of possession.
func TestSessionRoundTrip(t *testing.T) {
	s := testSessions(t)
	d := testDelegation()
	tok, exp, err := s.IssueSession(context.Background(), d, d.AgentDID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, SessionPrefix) || exp.After(time.Now().Add(15*time.Minute)) {
		t.Fatalf("token %q expires %v", tok, exp)
	}
	c, err := s.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Delegation()
	if got.AgentDID != d.AgentDID || got.RootIssuer != d.RootIssuer || got.RootAgentDID != d.RootAgentDID || got.Hash != d.Hash || !got.Presented || !got.ExpiresAt.Equal(exp) {
		t.Errorf("delegation %+v", got)
	}
	if s.Expired(c) || !s.WithClock(func() time.Time { return exp }).Expired(c) {
		t.Error("expiry not at the session's end")
	}

	// Never beyond the credential's own end.
	d.ExpiresAt = time.Now().Add(time.Minute)
	if _, exp, _ := s.IssueSession(context.Background(), d, d.AgentDID); exp.After(d.ExpiresAt) {
		t.Errorf("session ends %v after the credential %v", exp, d.ExpiresAt)
	}
	d.ExpiresAt = time.Now().Add(-time.Second)
	if _, _, err := s.IssueSession(context.Background(), d, d.AgentDID); !errors.Is(err, vc.ErrExpired) {
		t.Errorf("expired credential: %v", err)
	}
}

func TestSessionParseRefuses(t *testing.T) {
	s := testSessions(t)
	d := testDelegation()
	tok, _, err := s.IssueSession(context.Background(), d, d.AgentDID)
	if err != nil {
		t.Fatal(err)
	}
	dot := strings.LastIndexByte(tok, '.')
	otherKey, _ := DeriveKey(bytes.Repeat([]byte{8}, SessionKeySize), "policy")
	foreign, _, _ := NewSessions(otherKey, time.Minute).IssueSession(context.Background(), d, d.AgentDID)
	mac := func(s *Sessions, signed string) string {
		return signed + "." + base64.RawURLEncoding.EncodeToString(s.mac(signed))
	}
	for _, tc := range []struct {
		name, tok string
		want      error
	}{
		{"empty", "", ErrSessionMalformed},
		{"other prefix", "mcpis2." + tok[len(SessionPrefix):], ErrSessionMalformed},
		{"no MAC", tok[:dot], ErrSessionMalformed},
		{"MAC not base64url", tok[:dot] + ".!!", ErrSessionMalformed},
		{"MAC cut", tok[:len(tok)-4], ErrSessionSignature},
		{"other key", foreign, ErrSessionSignature},
		{"too long", SessionPrefix + strings.Repeat("A", maxSessionToken), ErrSessionMalformed},
		{"payload not base64url", mac(s, SessionPrefix+"!!"), ErrSessionMalformed},
		{"payload not JSON", mac(s, SessionPrefix+base64.RawURLEncoding.EncodeToString([]byte("{"))), ErrSessionMalformed},
		{"no agent", mac(s, SessionPrefix+base64.RawURLEncoding.EncodeToString([]byte(`{"exp":1}`))), ErrSessionMalformed},
		{"no expiry", mac(s, SessionPrefix+base64.RawURLEncoding.EncodeToString([]byte(`{"agt":"did:web:a"}`))), ErrSessionMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := s.Parse(tc.tok); !errors.Is(err, tc.want) || c != nil {
				t.Errorf("Parse = %+v, %v; want %v", c, err, tc.want)
			}
		})
	}
}

// FuzzSessionParse: no input panics, and only what the key signed parses.
func FuzzSessionParse(f *testing.F) {
	s := testSessions(f)
	d := testDelegation()
	tok, _, err := s.IssueSession(context.Background(), d, d.AgentDID)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add(tok[:len(tok)-1])
	f.Add(SessionPrefix + ".")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := s.Parse(in)
		if err != nil {
			return
		}
		signed := in[:strings.LastIndexByte(in, '.')]
		if !bytes.Equal(mustDecode(t, in[len(signed)+1:]), s.mac(signed)) {
			t.Fatalf("accepted %q without its MAC", in)
		}
		if c.AgentDID == "" || c.ExpiresAt == 0 {
			t.Fatalf("accepted claims %+v", c)
		}
	})
}

func mustDecode(t *testing.T, s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("accepted a MAC that is not base64url: %q", s)
	}
	return b
}

// Lookup: X-Mcpi-Handshake-Session is only the edge's (any fault is an
// error); Mcp-Session-Id is the MCP server's unless it is a valid session
// of the edge's.
func TestSessionLookup(t *testing.T) {
	s := testSessions(t)
	d := testDelegation()
	tok, exp, err := s.IssueSession(context.Background(), d, d.AgentDID)
	if err != nil {
		t.Fatal(err)
	}
	later := s.WithClock(func() time.Time { return exp.Add(time.Second) })
	for _, tc := range []struct {
		name    string
		s       *Sessions
		headers map[string][]string
		found   bool
		err     bool
	}{
		{"none", s, nil, false, false},
		{"edge header", s, map[string][]string{HeaderSession: {tok}}, true, false},
		{"edge header, spaces", s, map[string][]string{HeaderSession: {" " + tok + " "}}, true, false},
		{"edge header twice", s, map[string][]string{HeaderSession: {tok, tok}}, false, true},
		{"edge header not ours", s, map[string][]string{HeaderSession: {"abc"}}, false, true},
		{"edge header tampered", s, map[string][]string{HeaderSession: {tok + "x"}}, false, true},
		{"edge header expired", later, map[string][]string{HeaderSession: {tok}}, false, true},
		{"MCP session of the server", s, map[string][]string{HeaderMcpSessionID: {"3b1f8c0e-a7a4"}}, false, false},
		{"MCP session of the edge", s, map[string][]string{HeaderMcpSessionID: {"3b1f8c0e-a7a4", tok}}, true, false},
		{"MCP session of the edge, expired", later, map[string][]string{HeaderMcpSessionID: {tok}}, false, true},
		{"edge header decides over MCP's", s, map[string][]string{HeaderSession: {"abc"}, HeaderMcpSessionID: {tok}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for k, vs := range tc.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			got, err := tc.s.Lookup(r)
			if (got != nil) != tc.found || (err != nil) != tc.err {
				t.Fatalf("Lookup = %v, %v; want found %t, error %t", got, err, tc.found, tc.err)
			}
			if got != nil && (got.AgentDID != d.AgentDID || got.Hash != d.Hash) {
				t.Errorf("delegation %+v", got)
			}
			if tc.name == "edge header expired" && !errors.Is(err, ErrSessionExpired) {
				t.Errorf("err %v, want ErrSessionExpired", err)
			}
		})
	}
}
