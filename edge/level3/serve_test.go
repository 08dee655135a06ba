package level3

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// refuseAll is a credential verifier that accepts nothing.
type refuseAll struct{}

func (refuseAll) Verify(context.Context, []byte, ...vc.CheckOption) (*vc.Delegation, error) {
	return nil, vc.ErrUntrustedIssuer
}

// newStep builds a step of mode with the default paths, in memory.
func newStep(t testing.TB, mode string, legacyPass bool) *Step {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := challenge.NewMemoryStore(ctx)
	cfg := Config{
		Mode: mode, HandshakePath: "/api/mcp/handshake", VerifyPath: "/api/mcp/verify",
		ChallengeTTL: 5 * time.Minute, HandshakeSkew: 2 * time.Minute, SessionTTL: 15 * time.Minute,
		LegacyPass: legacyPass, MaxBody: 1 << 10, Policy: "test", TrustedIssuers: []string{vc.AnyIssuer},
	}
	p := Parts{
		Ctx: ctx, Store: store, Resolver: didresolver.New(), Verifier: refuseAll{},
		Site:     site.New(nil, nil),
		Carriers: carrier.New(carrier.Config{Enabled: carrier.All, MaxBody: cfg.MaxBody}),
		Logger:   zap.NewNop(),
		Checks:   func(*http.Request, []string) ([]vc.CheckOption, error) { return nil, nil },
	}
	if mode == handshake.Proxy {
		p.Binder = store
	}
	s, err := New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// unreachable is a rest of the route that must not be called.
func unreachable(t testing.TB) handshake.Next {
	return func(http.ResponseWriter, *http.Request) error {
		t.Error("the step called the rest of the route")
		return nil
	}
}

// serveStep runs r through s; the step must not write to the response.
func serveStep(t *testing.T, s *Step, r *http.Request) (Result, error) {
	t.Helper()
	rec := httptest.NewRecorder()
	res, err := s.Serve(rec, r, unreachable(t), nil)
	if rec.Code != http.StatusOK || rec.Body.Len() > 0 || len(rec.Header()) > 0 {
		t.Errorf("the step wrote a response itself: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	return res, err
}

func post(path, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://edge.test"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func TestServeMethodNotAllowed(t *testing.T) {
	res, err := serveStep(t, newStep(t, handshake.Terminate, false), httptest.NewRequest(http.MethodGet, "http://edge.test/api/mcp/verify", nil))
	if err != nil || res.Outcome != Answered || res.Answer == nil {
		t.Fatalf("Serve = %+v, %v; want an answer", res, err)
	}
	a := res.Answer
	want := http.Header{
		"Allow": {"POST"}, "Content-Type": {"application/json"},
		"X-Content-Type-Options": {"nosniff"}, "Cache-Control": {"no-store"},
	}
	if a.Status != http.StatusMethodNotAllowed || !equalHeader(a.Header, want) ||
		string(a.Body) != `{"error":"method_not_allowed","error_description":"handshake endpoints take JSON-RPC over POST"}` {
		t.Errorf("answer %d %v %s", a.Status, a.Header, a.Body)
	}

	// In proxy mode the upstream decides about other methods.
	res, err = serveStep(t, newStep(t, handshake.Proxy, false), httptest.NewRequest(http.MethodGet, "http://edge.test/api/mcp/verify", nil))
	if err != nil || res.Outcome != NotMine {
		t.Errorf("proxy mode: Serve = %+v, %v; want NotMine", res, err)
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if strings.Join(a[k], ",") != strings.Join(v, ",") {
			return false
		}
	}
	return true
}

// TestServeCalls: the calls on the handshake paths, malformed ones
// included, are answered with JSON-RPC, returned and not written.
func TestServeCalls(t *testing.T) {
	s := newStep(t, handshake.Terminate, false)
	for _, tc := range []struct {
		name, path, body string
		code             int // the JSON-RPC error code; 0: a result
	}{
		{"handshake", "/api/mcp/handshake", `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"}}`, 0},
		{"no params", "/api/mcp/handshake", `{"jsonrpc":"2.0","id":1,"method":"handshake"}`, challenge.CodeInvalidParams},
		{"agentDid not a DID", "/api/mcp/verify", `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"nobody"}}`, challenge.CodeInvalidParams},
		{"verify without answer", "/api/mcp/verify", `{"jsonrpc":"2.0","id":2,"method":"verify","params":{}}`, challenge.CodeInvalidParams},
		{"unknown nonce", "/api/mcp/verify", `{"jsonrpc":"2.0","id":2,"method":"verify","params":{"signedChallenge":{"challenge":"00","nonce":"none","timestamp":1,"agentDid":"did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK","signature":"AA","publicKey":"AA"},"credential":"x"}}`, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := serveStep(t, s, post(tc.path, tc.body))
			if err != nil || res.Outcome != Answered || res.Answer == nil {
				t.Fatalf("Serve = %+v, %v; want an answer", res, err)
			}
			var msg struct {
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(res.Answer.Body, &msg); err != nil {
				t.Fatalf("answer %s: %v", res.Answer.Body, err)
			}
			if res.Answer.Status != http.StatusOK || res.Answer.Header.Get("Content-Type") != "application/json" || res.Answer.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("answer %d %v", res.Answer.Status, res.Answer.Header)
			}
			switch {
			case tc.code == 0 && (msg.Error != nil || len(msg.Result) == 0):
				t.Errorf("want a result, got %s", res.Answer.Body)
			case tc.code != 0 && msg.Error == nil:
				t.Errorf("want an error, got %s", res.Answer.Body)
			case tc.code > 0 && msg.Error.Code != tc.code:
				t.Errorf("error code %d, want %d: %s", msg.Error.Code, tc.code, res.Answer.Body)
			}
		})
	}
}

// TestServeNotMine: what is not a handshake call goes on to the pipeline.
func TestServeNotMine(t *testing.T) {
	s := newStep(t, handshake.Terminate, false)
	for _, tc := range []struct{ name, path, body string }{
		{"another path", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{}}`},
		{"another method", "/api/mcp/handshake", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"not JSON", "/api/mcp/handshake", "\xff\xfe"},
		{"batch", "/api/mcp/handshake", `[{"jsonrpc":"2.0","id":1,"method":"handshake"}]`},
		{"legacy form, legacy verify", "/api/mcp/handshake", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}`},
	} {
		res, err := serveStep(t, s, post(tc.path, tc.body))
		if err != nil || res.Outcome != NotMine {
			t.Errorf("%s: Serve = %+v, %v; want NotMine", tc.name, res, err)
		}
	}
}

func TestServeRefusesLargeBody(t *testing.T) {
	s := newStep(t, handshake.Terminate, false)
	res, err := serveStep(t, s, post("/api/mcp/handshake", `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"`+strings.Repeat("a", 2<<10)+`"}}`))
	if err != nil || res.Outcome != Refused || !errors.Is(res.Err, carrier.ErrBodyTooLarge) {
		t.Errorf("Serve = %+v, %v; want Refused with ErrBodyTooLarge", res, err)
	}
}

// TestServeLegacyPass: under legacy_handshake pass, a legacy KYA form
// without a credential or session is handed on, one with a credential is
// not (the pipeline verifies it).
func TestServeLegacyPass(t *testing.T) {
	s := newStep(t, handshake.Terminate, true)
	legacy := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi_handshake","arguments":{}}}`
	for _, path := range []string{"/mcp", "/api/mcp/handshake"} {
		res, err := serveStep(t, s, post(path, legacy))
		if err != nil || res.Outcome != PassOn {
			t.Errorf("%s: Serve = %+v, %v; want PassOn", path, res, err)
		}
	}
	r := post("/mcp", legacy)
	r.Header.Set("KYA-Delegation", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	if res, err := serveStep(t, s, r); err != nil || res.Outcome != NotMine {
		t.Errorf("with a credential: Serve = %+v, %v; want NotMine", res, err)
	}
	r = post("/mcp", legacy)
	r.Header.Set(handshake.HeaderSession, "not-a-session")
	if res, err := serveStep(t, s, r); err != nil || res.Outcome != NotMine {
		t.Errorf("with a session: Serve = %+v, %v; want NotMine", res, err)
	}
}

func TestSessionNone(t *testing.T) {
	for _, mode := range []string{handshake.Terminate, handshake.Proxy} {
		d, err := newStep(t, mode, false).Session(post("/mcp", `{}`))
		if d != nil || err != nil {
			t.Errorf("%s: Session = %v, %v; want none", mode, d, err)
		}
	}
}

// FuzzServe: whatever the body, the step never writes and never calls
// the rest of the route itself (terminate mode), and an answer is whole.
func FuzzServe(f *testing.F) {
	paths := []string{"/api/mcp/handshake", "/api/mcp/verify", "/mcp"}
	f.Add(uint8(0), `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"did:key:z"}}`)
	f.Add(uint8(1), `{"jsonrpc":"2.0","id":2,"method":"verify","params":{}}`)
	f.Add(uint8(2), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}`)
	s := newStep(f, handshake.Terminate, true)
	f.Fuzz(func(t *testing.T, path uint8, body string) {
		rec := httptest.NewRecorder()
		res, err := s.Serve(rec, post(paths[int(path)%len(paths)], body), unreachable(t), nil)
		if rec.Body.Len() > 0 || len(rec.Header()) > 0 {
			t.Fatalf("the step wrote a response itself: %v %q", rec.Header(), rec.Body)
		}
		if err != nil {
			t.Fatalf("terminate mode returned a host error: %v", err)
		}
		if (res.Outcome == Answered) != (res.Answer != nil) {
			t.Fatalf("outcome %d with answer %v", res.Outcome, res.Answer)
		}
		if res.Outcome == Refused && res.Err == nil {
			t.Fatal("refused without a cause")
		}
	})
}
