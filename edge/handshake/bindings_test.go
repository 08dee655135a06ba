package handshake

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

const (
	testSessionID = "3b1f8c0e-a7a4-4d0c-9d4b-0f2b7c1d9e55"
	testAgent     = "did:web:agent.example.com"
)

func verifyAnswer(result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":2,"result":` + result + `}`)
}

// What the edge binds of an upstream's verify answer, and why not.
func TestUpstreamSessionOf(t *testing.T) {
	ok := `{"verified":true,"sessionId":"` + testSessionID + `"}`
	for _, tc := range []struct {
		name   string
		status int
		enc    string
		body   []byte
		why    string
	}{
		{"bound", 200, "", verifyAnswer(ok), ""},
		{"same agent, expiry", 200, "", verifyAnswer(`{"verified":true,"sessionId":"` + testSessionID + `","agentDid":"` + testAgent + `","expiresAt":"2030-01-02T03:04:05Z"}`), ""},
		{"error status", 500, "", verifyAnswer(ok), "http_status"},
		{"compressed", 200, "gzip", verifyAnswer(ok), "encoded"},
		{"not JSON", 200, "", []byte("<html>"), "not_json_rpc"},
		{"JSON-RPC error", 200, "", []byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no"}}`), "no_result"},
		{"null result", 200, "", verifyAnswer(`null`), "no_result"},
		{"result not an object", 200, "", verifyAnswer(`[1]`), "bad_result"},
		{"not verified", 200, "", verifyAnswer(`{"verified":false,"sessionId":"` + testSessionID + `"}`), "not_verified"},
		{"no session", 200, "", verifyAnswer(`{"verified":true}`), "no_session"},
		{"session not a string", 200, "", verifyAnswer(`{"verified":true,"sessionId":12345678901234567}`), "no_session"},
		{"guessable session", 200, "", verifyAnswer(`{"verified":true,"sessionId":"abc"}`), "session_id_unusable"},
		{"session with a space", 200, "", verifyAnswer(`{"verified":true,"sessionId":"` + testSessionID + ` x"}`), "session_id_unusable"},
		{"other agent", 200, "", verifyAnswer(`{"verified":true,"sessionId":"` + testSessionID + `","agentDid":"did:web:other.example.com"}`), "other_agent"},
		{"bad expiry", 200, "", verifyAnswer(`{"verified":true,"sessionId":"` + testSessionID + `","expiresAt":"tomorrow"}`), "bad_expiry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := http.Header{}
			if tc.enc != "" {
				hdr.Set("Content-Encoding", tc.enc)
			}
			s, why := UpstreamSessionOf(tc.status, hdr, tc.body, testAgent)
			if why != tc.why {
				t.Fatalf("why = %q, want %q", why, tc.why)
			}
			if (why == "") != (s.id == testSessionID) {
				t.Errorf("session id %q with why %q", s.id, why)
			}
		})
	}
}

// FuzzUpstreamSessionOf: whatever the upstream answers, a bound id is one
// that SessionID would accept back from a client.
func FuzzUpstreamSessionOf(f *testing.F) {
	f.Add(verifyAnswer(`{"verified":true,"sessionId":"` + testSessionID + `"}`))
	f.Add(verifyAnswer(`{"verified":true,"sessionId":"` + testSessionID + `","expiresAt":"2030-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"result":{"verified":true,"sessionId":"\u0041bcdefghijklmnopq"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, why := UpstreamSessionOf(http.StatusOK, http.Header{}, body, testAgent)
		if why != "" {
			return
		}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set(HeaderMcpSessionID, s.id)
		if id, err := SessionID(r); err != nil || id != s.id {
			t.Fatalf("bound %q, which a client presents as %q (%v)", s.id, id, err)
		}
	})
}

func TestSessionID(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		want    string
		err     error
	}{
		{"none", nil, "", nil},
		{"handshake header", map[string][]string{HeaderSession: {testSessionID}}, testSessionID, nil},
		{"Mcp-Session-Id", map[string][]string{HeaderMcpSessionID: {testSessionID}}, testSessionID, nil},
		{"handshake header wins", map[string][]string{HeaderSession: {testSessionID}, HeaderMcpSessionID: {"another-session-id-0000"}}, testSessionID, nil},
		{"two handshake headers", map[string][]string{HeaderSession: {testSessionID, testSessionID}}, "", ErrSessionMalformed},
		{"two Mcp-Session-Id", map[string][]string{HeaderMcpSessionID: {testSessionID, testSessionID}}, "", nil},
		{"too short", map[string][]string{HeaderSession: {"abc"}}, "", nil},
		{"too long", map[string][]string{HeaderSession: {strings.Repeat("a", maxUpstreamSessionID+1)}}, "", nil},
		{"Unicode space", map[string][]string{HeaderSession: {testSessionID + "\u00a0"}}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for k, vs := range tc.headers {
				r.Header[k] = vs
			}
			id, err := SessionID(r)
			if id != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("SessionID = %q, %v; want %q, %v", id, err, tc.want, tc.err)
			}
		})
	}
}

// A binding admits its own agent until it ends, and an upstream cannot
// move a bound session to another agent.
func TestBindings(t *testing.T) {
	store := challenge.NewMemoryStore(context.Background())
	defer store.Close()
	b := NewBindings(store, "policy", 15*time.Minute)
	d := testDelegation()
	v := &challenge.Verified{AgentDID: d.AgentDID, Delegation: d}
	until, why, err := b.Bind(context.Background(), UpstreamSession{id: testSessionID}, v)
	if err != nil || why != "" || until.After(time.Now().Add(15*time.Minute)) {
		t.Fatalf("Bind = %v %q %v", until, why, err)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set(HeaderMcpSessionID, testSessionID)
	got, err := b.Lookup(r)
	if err != nil || got == nil || got.AgentDID != d.AgentDID {
		t.Fatalf("Lookup = %+v, %v", got, err)
	}
	if got, err := NewBindings(store, "other policy", time.Minute).Lookup(r); got != nil || err != nil {
		t.Errorf("another policy found the binding: %+v, %v", got, err)
	}
	if _, err := b.WithClock(func() time.Time { return until }).Lookup(r); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("after its end: %v", err)
	}
	other := *d
	other.AgentDID = "did:web:other.example.com"
	if _, why, err := b.Bind(context.Background(), UpstreamSession{id: testSessionID}, &challenge.Verified{AgentDID: other.AgentDID, Delegation: &other}); why != "session_id_of_another_agent" || err != nil {
		t.Errorf("second agent: %q, %v", why, err)
	}
	if got, _ := b.Lookup(r); got == nil || got.AgentDID != d.AgentDID {
		t.Errorf("binding moved to %+v", got)
	}
}
