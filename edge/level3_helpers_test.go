package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// rpcReply is a decoded JSON-RPC response of the edge.
type rpcReply struct {
	Status  int
	Header  http.Header
	JSONRPC string           `json:"jsonrpc"`
	ID      json.RawMessage  `json:"id"`
	Result  json.RawMessage  `json:"result"`
	Error   *challenge.Error `json:"error"`
	Raw     []byte
	// Next reports whether the request reached next (the upstream).
	Next bool
}

// l3Serve runs r through h with next (nil: an upstream that answers 200
// and records nothing).
func l3Serve(t testing.TB, h *Handler, r *http.Request, next Next) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	rec := httptest.NewRecorder()
	r = prepareRequest(r, newTestReplacer())
	called := false
	wrapped := Next(func(w http.ResponseWriter, r *http.Request) error {
		called = true
		if next == nil {
			w.WriteHeader(http.StatusOK)
			return nil
		}
		return next(w, r)
	})
	if err := h.ServeNext(rec, r, wrapped); err != nil {
		t.Fatalf("ServeHTTP returned %v", err)
	}
	return rec, called
}

// rpcCall POSTs a JSON-RPC request to path and decodes the answer.
func rpcCall(t testing.TB, h *Handler, path string, msg any, next Next) rpcReply {
	t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	rec, called := l3Serve(t, h, newRequest(http.MethodPost, path, string(body)), next)
	rep := rpcReply{Status: rec.Code, Header: rec.Header(), Raw: rec.Body.Bytes(), Next: called}
	// Level 1's own rejections (401, 413) are not JSON-RPC.
	isRPC := rec.Code == http.StatusOK || rec.Code == http.StatusServiceUnavailable
	if ct := rec.Header().Get("Content-Type"); isRPC && strings.HasPrefix(ct, "application/json") && rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("response is not JSON: %v: %s", err, rec.Body)
		}
	}
	return rep
}

// code is the JSON-RPC error code of the reply, 0 for a result.
func (r rpcReply) code() int {
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

func handshakeMsg(id int, agentDID string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "handshake",
		"params": map[string]any{"agentDid": agentDID, "supportedMethods": []string{"Ed25519"}, "version": "1.0"}}
}

func verifyMsg(id int, sc challenge.SignedChallenge, cred any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "verify",
		"params": map[string]any{"signedChallenge": sc, "credential": cred}}
}

// doHandshake asks h (at path) for a challenge for p.
func doHandshake(t testing.TB, h *Handler, path string, p party, next Next) challenge.HandshakeResult {
	t.Helper()
	rep := rpcCall(t, h, path, handshakeMsg(1, p.did), next)
	if rep.Status != http.StatusOK || rep.Error != nil {
		t.Fatalf("handshake: HTTP %d %s", rep.Status, rep.Raw)
	}
	var hr challenge.HandshakeResult
	if err := json.Unmarshal(rep.Result, &hr); err != nil || hr.Challenge == "" || hr.Nonce == "" {
		t.Fatalf("handshake result %s: %v", rep.Result, err)
	}
	return hr
}

// answer signs hr's challenge as p.
func answer(t testing.TB, p party, hr challenge.HandshakeResult) challenge.SignedChallenge {
	t.Helper()
	sc, err := challenge.SignChallenge(p.priv, challenge.SignedChallenge{
		Challenge: hr.Challenge, Nonce: hr.Nonce, AgentDID: p.did,
		Timestamp: challenge.TimestampRFC3339(time.Now()),
	})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// l3Handler provisions a level 3 handler trusting f's user.
func (f fixture) l3Handler(t testing.TB, mod func(*setup)) *Handler {
	return f.handler(t, func(c *setup) {
		c.Level = 3
		if mod != nil {
			mod(c)
		}
	})
}

// fakeUpstream is an MCP-I-aware upstream with its own handshake
// (served through next or an httptest.Server). It records every request.
type fakeUpstream struct {
	t        testing.TB
	hsPath   string
	vfPath   string
	docPaths map[string]string // served at /.well-known/mcp-i.json when set
	reqs     chan recordedReq
	// challenges it issued, by nonce.
	issued map[string]string
	// override, when set, answers a request first (reporting whether it
	// did).
	override func(http.ResponseWriter, *http.Request) bool
}

type recordedReq struct {
	Path   string
	Header http.Header
	Body   []byte
}

func newFakeUpstream(t testing.TB, hsPath, vfPath string) *fakeUpstream {
	return &fakeUpstream{t: t, hsPath: hsPath, vfPath: vfPath, reqs: make(chan recordedReq, 100), issued: map[string]string{}}
}

func (u *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u.override != nil && u.override(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	u.reqs <- recordedReq{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	switch r.URL.Path {
	case "/.well-known/mcp-i.json":
		if u.docPaths == nil {
			http.NotFound(w, r)
			return
		}
		doc, _ := json.Marshal(map[string]any{"mcp_i": map[string]any{"version": "2.0.0", "endpoints": u.docPaths, "supportedMethods": []string{"Ed25519"}}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	case u.hsPath:
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		// Unique across the test binary: the test handlers share one
		// store, as Caddy's default store is shared by every config.
		n := upstreamNonces.Add(1)
		chal, nonce := fmt.Sprintf("a0b1c2d3e4f5%06d", n), fmt.Sprintf("6789012345%06d", n)
		u.issued[nonce] = chal
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"challenge":%q,"nonce":%q,"supportedMethods":["Ed25519"],"expiresIn":300}}`, req.ID, chal, nonce)
	case u.vfPath:
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "verify")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"verified":true,"sessionId":"upstream-session"}}`, req.ID)
	default:
		w.WriteHeader(http.StatusTeapot)
	}
}

// upstreamNonces numbers the challenges every fakeUpstream issues.
var upstreamNonces atomic.Int64

// handler adapts the upstream to next.
func (u *fakeUpstream) handler() Next {
	return Next(func(w http.ResponseWriter, r *http.Request) error {
		u.ServeHTTP(w, r)
		return nil
	})
}

// drain returns what the upstream received since the last drain.
func (u *fakeUpstream) drain() []recordedReq {
	var out []recordedReq
	for {
		select {
		case r := <-u.reqs:
			out = append(out, r)
		default:
			return out
		}
	}
}

// bareContext lives as long as the test.
func bareContext(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// redisStore is a nonce store in the Redis at addr (timeout: every one of
// its timeouts; 0 for the defaults), closed with the test.
func redisStore(t testing.TB, addr string, timeout time.Duration) challenge.NonceStore {
	t.Helper()
	s, err := challenge.NewRedisStore(challenge.RedisOptions{Addr: addr,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// useStore makes a handler keep its nonces in s (named name in metrics).
func useStore(s challenge.NonceStore, name string) func(*setup) {
	return func(c *setup) { c.use(WithNonceStore(s, name)) }
}
