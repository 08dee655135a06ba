package handshake

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
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

const agentDID = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"

type noResolver struct{}

func (noResolver) Resolve(context.Context, string) (*didresolver.Document, error) {
	return nil, errors.New("no DIDs here")
}

type noCredentials struct{}

func (noCredentials) Verify(context.Context, []byte, ...vc.CheckOption) (*vc.Delegation, error) {
	return nil, vc.ErrSignature
}

type recorded struct{ mode, call, result string }

type recorder struct{ calls []recorded }

func (r *recorder) Handshake(_ *http.Request, mode, call, result string, _ int, _ *vc.Delegation) {
	r.calls = append(r.calls, recorded{mode, call, result})
}

// newTestCalls is a Calls of mode whose route functions fail the test
// when a call should not have reached them; forward answers proxied calls.
func newTestCalls(t *testing.T, mode string, forward func(http.ResponseWriter, *http.Request, Next, Endpoint, []byte, bool) (*Captured, error)) (*Calls, *recorder, challenge.NonceStore) {
	t.Helper()
	store := challenge.NewMemoryStore(t.Context())
	svc, err := challenge.New(challenge.WithStore(store), challenge.WithResolver(noResolver{}), challenge.WithCredentialVerifier(noCredentials{}))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	c := &Calls{
		Mode: mode, Service: svc, MaxBody: 1 << 20, ReservedPrefix: "vp:",
		Checks: func(*http.Request, []string) ([]vc.CheckOption, error) {
			t.Error("a credential check ran")
			return nil, nil
		},
		Identified:     func(*http.Request, *vc.Delegation) { t.Error("an identity reached the host") },
		Inject:         func(*http.Request, *vc.Delegation) error { t.Error("an identity was injected"); return nil },
		RemoveCarriers: func(r *http.Request) { r.Header.Del("Authorization") },
		Endpoints: func(*http.Request, Next) *Endpoints {
			return &Endpoints{Handshake: PathEndpoint("/up/hs"), Verify: PathEndpoint("/up/vf")}
		},
		Forward: forward,
		WriteJSON: func(w http.ResponseWriter, status int, body []byte, _ string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
		},
		Recorder: rec,
		Logger:   zap.NewNop(),
	}
	return c, rec, store
}

func noForward(t *testing.T) func(http.ResponseWriter, *http.Request, Next, Endpoint, []byte, bool) (*Captured, error) {
	return func(http.ResponseWriter, *http.Request, Next, Endpoint, []byte, bool) (*Captured, error) {
		t.Error("a call was forwarded")
		return nil, errors.New("no upstream")
	}
}

type rpcAnswer struct {
	Result *challenge.HandshakeResult `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func serveCall(t *testing.T, c *Calls, body string) (Outcome, *httptest.ResponseRecorder, rpcAnswer, error) {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/api/mcp/handshake", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer for-the-edge")
	out, err := c.Serve(w, r, nil, []byte(body), nil)
	var a rpcAnswer
	if w.Body.Len() > 0 {
		if jerr := json.Unmarshal(w.Body.Bytes(), &a); jerr != nil {
			t.Fatalf("answer %s: %v", w.Body, jerr)
		}
	}
	return out, w, a, err
}

const handshakeCall = `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"` + agentDID + `"}}`

func TestCallsTerminateHandshake(t *testing.T) {
	c, rec, _ := newTestCalls(t, Terminate, noForward(t))
	out, w, a, err := serveCall(t, c, handshakeCall)
	if out != Answered || err != nil || w.Code != http.StatusOK || a.Result == nil || a.Result.Challenge == "" || a.Result.Nonce == "" {
		t.Fatalf("%v %v HTTP %d %s", out, err, w.Code, w.Body)
	}
	if want := []recorded{{Terminate, "handshake", "issued"}}; len(rec.calls) != 1 || rec.calls[0] != want[0] {
		t.Errorf("recorded %v, want %v", rec.calls, want)
	}
}

// What is no handshake or verify call is not answered: the pipeline goes on.
func TestCallsNotACall(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}`,
		`[` + handshakeCall + `]`,
		`{"jsonrpc":"2.0","method":"handshake","params":{"agentDid":"` + agentDID + `"}}`,
		`not json`,
	} {
		c, rec, _ := newTestCalls(t, Terminate, noForward(t))
		out, w, _, err := serveCall(t, c, body)
		if out != NotACall || err != nil || w.Body.Len() != 0 || len(rec.calls) != 0 {
			t.Errorf("%s: %v %v %q recorded %v", body, out, err, w.Body, rec.calls)
		}
	}
}

// A verify naming a presentation replay record is refused before any
// credential is looked at, and the record is not consumed.
func TestCallsVerifyReservedNonce(t *testing.T) {
	for _, mode := range []string{Terminate, Proxy} {
		c, rec, store := newTestCalls(t, mode, noForward(t))
		ctx := context.Background()
		if err := store.Put(ctx, "vp:abc", challenge.Record{Challenge: "c", ExpiresAt: time.Now().Add(time.Minute)}, time.Minute); err != nil {
			t.Fatal(err)
		}
		body := `{"jsonrpc":"2.0","id":2,"method":"verify","params":{"signedChallenge":{"challenge":"c","nonce":"vp:abc","timestamp":1,"agentDid":"` + agentDID + `","proofValue":"z1"},"credential":"x.y.z"}}`
		out, w, a, err := serveCall(t, c, body)
		if out != Answered || err != nil || w.Code != http.StatusOK || a.Error == nil || a.Error.Code != challenge.CodeReplay {
			t.Fatalf("%s: %v %v HTTP %d %s", mode, out, err, w.Code, w.Body)
		}
		if len(rec.calls) != 1 || rec.calls[0] != (recorded{mode, "verify", "replay"}) {
			t.Errorf("%s: recorded %v", mode, rec.calls)
		}
		if _, err := store.Consume(ctx, "vp:abc"); err != nil {
			t.Errorf("%s: the replay record was consumed: %v", mode, err)
		}
	}
}

// Proxy mode: the upstream's challenge is held in the edge's store before
// the agent gets it, and the call reaches the upstream without the
// credential meant for the edge.
func TestCallsProxyHandshake(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":1,"result":{"challenge":"upstream-challenge","nonce":"upstream-nonce-0123456789","expiresIn":60}}`
	var sent *http.Request
	c, rec, store := newTestCalls(t, Proxy, func(_ http.ResponseWriter, r *http.Request, _ Next, ep Endpoint, _ []byte, capture bool) (*Captured, error) {
		if ep.String() != "/up/hs" || !capture {
			t.Errorf("forwarded to %s, capture %t", ep, capture)
		}
		sent = r
		return &Captured{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(answer)}, nil
	})
	out, w, _, err := serveCall(t, c, handshakeCall)
	if out != Answered || err != nil || w.Code != http.StatusOK || w.Body.String() != answer {
		t.Fatalf("%v %v HTTP %d %s", out, err, w.Code, w.Body)
	}
	if sent == nil || sent.Header.Get("Authorization") != "" {
		t.Error("the edge's credential travelled to the upstream")
	}
	if _, err := store.Consume(context.Background(), "upstream-nonce-0123456789"); err != nil {
		t.Errorf("the upstream's challenge is not held: %v", err)
	}
	if len(rec.calls) != 1 || rec.calls[0] != (recorded{Proxy, "handshake", "issued"}) {
		t.Errorf("recorded %v", rec.calls)
	}
}

// Proxy mode: an upstream the edge cannot reach is the host's to answer;
// an upstream nonce in the edge's reserved name space is never relayed.
func TestCallsProxyUpstreamFailures(t *testing.T) {
	unreachable := &StatusError{Status: http.StatusBadGateway, Err: errors.New("dial")}
	c, rec, _ := newTestCalls(t, Proxy, func(http.ResponseWriter, *http.Request, Next, Endpoint, []byte, bool) (*Captured, error) {
		return nil, unreachable
	})
	out, w, _, err := serveCall(t, c, handshakeCall)
	if out != Answered || !errors.Is(err, unreachable) || w.Body.Len() != 0 {
		t.Errorf("%v %v %s", out, err, w.Body)
	}
	if len(rec.calls) != 1 || rec.calls[0].result != "upstream_error" {
		t.Errorf("recorded %v", rec.calls)
	}

	reserved := `{"jsonrpc":"2.0","id":1,"result":{"challenge":"c","nonce":"vp:abc","expiresIn":60}}`
	c, rec, _ = newTestCalls(t, Proxy, func(http.ResponseWriter, *http.Request, Next, Endpoint, []byte, bool) (*Captured, error) {
		return &Captured{Status: http.StatusOK, Header: http.Header{}, Body: []byte(reserved)}, nil
	})
	out, w, a, err := serveCall(t, c, handshakeCall)
	if out != Answered || err != nil || strings.Contains(w.Body.String(), "vp:abc") || a.Error == nil {
		t.Errorf("%v %v %s", out, err, w.Body)
	}
	if len(rec.calls) != 1 || rec.calls[0].result != "upstream_error" {
		t.Errorf("recorded %v", rec.calls)
	}
}
