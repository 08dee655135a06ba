package integration

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Level 3 edge paths (the defaults).
const (
	l3HandshakePath = "/api/mcp/handshake"
	l3VerifyPath    = "/api/mcp/verify"
)

// startL3Edge starts Caddy with level2Site in front of upstream (nil: the
// demo MCP server), recorded, with Caddy's storage at storageRoot so that
// instances can share it like a cluster does.
func startL3Edge(t *testing.T, extra string, upstream http.Handler, storageRoot string) *harness {
	t.Helper()
	if upstream == nil {
		upstream = mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})
	}
	rec := &recorder{next: upstream}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	caddyfile := testCaddyfile(freePort(t), storageRoot, level2Site(h.port, up.Listener.Addr().String(), extra))
	h.start(dir, caddyfile)
	return h
}

// rpcError returns the JSON-RPC error code of the response to id, 0 if it
// is a result.
func (r rpcResponse) rpcError(t *testing.T, id int) int {
	t.Helper()
	for _, m := range r.Msgs {
		if n, ok := m["id"].(float64); ok && int(n) == id {
			if e, ok := m["error"].(map[string]any); ok {
				code, _ := e["code"].(float64)
				return int(code)
			}
			return 0
		}
	}
	t.Fatalf("no JSON-RPC response with id %d (HTTP %d): %s", id, r.Status, r.Body)
	return 0
}

// agentHandshake is the agent's side of a handshake at the edge h: it asks
// for a challenge and returns it.
func agentHandshake(ctx context.Context, t *testing.T, h *harness, agent party, id int) challenge.HandshakeResult {
	t.Helper()
	resp := h.post(ctx, l3HandshakePath, nil, "", map[string]any{"jsonrpc": "2.0", "id": id, "method": "handshake",
		"params": map[string]any{"agentDid": agent.did, "supportedMethods": []string{"Ed25519"}, "version": "1.0"}})
	if resp.Status != http.StatusOK {
		t.Fatalf("handshake at %s: HTTP %d %s", h.base, resp.Status, resp.Body)
	}
	var hr challenge.HandshakeResult
	raw, _ := json.Marshal(resp.result(t, id))
	if err := json.Unmarshal(raw, &hr); err != nil || hr.Challenge == "" || hr.Nonce == "" {
		t.Fatalf("handshake result %s: %v", raw, err)
	}
	return hr
}

// signAnswer signs hr as the agent would (challenge.SignChallenge).
func signAnswer(t *testing.T, key crypto.PrivateKey, did string, hr challenge.HandshakeResult) challenge.SignedChallenge {
	t.Helper()
	sc, err := challenge.SignChallenge(key, challenge.SignedChallenge{
		Challenge: hr.Challenge, Nonce: hr.Nonce, AgentDID: did, Timestamp: challenge.TimestampRFC3339(time.Now()),
	})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// agentVerify posts the signed answer and the credential.
func agentVerify(ctx context.Context, h *harness, hdr http.Header, sc challenge.SignedChallenge, cred string, id int) rpcResponse {
	h.t.Helper()
	return h.post(ctx, l3VerifyPath, hdr, "", map[string]any{"jsonrpc": "2.0", "id": id, "method": "verify",
		"params": map[string]any{"signedChallenge": sc, "credential": cred}})
}

// handshakeUpstream is an MCP-I-aware upstream with its own Level 3
// handshake (a challenge.Service of its own) at /rpc/handshake and
// /rpc/verify, announced in its /.well-known/mcp-i.json, plus the demo MCP
// server at /mcp. It records the verify calls it got.
type handshakeUpstream struct {
	svc *challenge.Service
	mcp http.Handler

	mu       sync.Mutex
	verifies []record
	results  []error
}

func newHandshakeUpstream(t *testing.T, audience string) *handshakeUpstream {
	return &handshakeUpstream{svc: newUpstreamChallengeService(t, audience), mcp: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
}

// newUpstreamChallengeService is the upstream's own handshake service:
// any issuer, credentials for audiences, challenges in memory.
func newUpstreamChallengeService(t *testing.T, audiences ...string) *challenge.Service {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	res := didresolver.New()
	svc, err := challenge.New(
		challenge.WithStore(challenge.NewMemoryStore(ctx)),
		challenge.WithResolver(res),
		challenge.WithCredentialVerifier(vc.NewVerifier(res, vc.WithTrustedIssuers(vc.AnyIssuer))),
		challenge.WithCredentialChecks(vc.ForAudience(audiences...)),
	)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// upstreamMCPIDocument announces the upstream's handshake endpoints.
const upstreamMCPIDocument = `{"mcp_i":{"version":"2.0.0","endpoints":{"handshake":"/rpc/handshake","verify":"/rpc/verify"},"supportedMethods":["Ed25519"]}}`

// serveUpstreamHandshake answers a handshake or verify call with svc, as
// an MCP-I upstream does on its own endpoints. onVerify sees every verify
// call (its body and how svc's check went) and completes the result of
// one that passed, with the session the upstream opens.
func serveUpstreamHandshake(w http.ResponseWriter, r *http.Request, svc *challenge.Service, onVerify func(body []byte, err error, res *challenge.VerifyResult)) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body)
	call, err := challenge.ParseRequest(body.Bytes(), 0)
	var resp *challenge.Response
	switch {
	case err != nil:
		id := json.RawMessage(nil)
		if call != nil {
			id = call.ID
		}
		resp = challenge.ErrorResponse(id, err)
	case call.Kind == challenge.KindHandshake:
		hr, err := svc.Issue(r.Context(), *call.Handshake)
		if err != nil {
			resp = challenge.ErrorResponse(call.ID, err)
		} else {
			resp = challenge.ResultResponse(call.ID, hr)
		}
	case call.Kind == challenge.KindVerify:
		v, err := svc.Verify(r.Context(), *call.Verify)
		if err != nil {
			onVerify(body.Bytes(), err, nil)
			resp = challenge.ErrorResponse(call.ID, err)
			break
		}
		res := v.Result()
		onVerify(body.Bytes(), nil, &res)
		resp = challenge.ResultResponse(call.ID, res)
	default:
		resp = challenge.ErrorResponse(call.ID, challenge.ErrMethodNotFound)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (u *handshakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/mcp-i.json":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(upstreamMCPIDocument))
	case "/rpc/handshake", "/rpc/verify":
		serveUpstreamHandshake(w, r, u.svc, func(body []byte, err error, res *challenge.VerifyResult) {
			u.mu.Lock()
			u.verifies = append(u.verifies, record{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
			u.results = append(u.results, err)
			u.mu.Unlock()
			if res != nil {
				res.SessionID = "upstream-session-1"
			}
		})
	default:
		u.mcp.ServeHTTP(w, r)
	}
}

// verified returns the verify calls the upstream got and how its own
// check of each went.
func (u *handshakeUpstream) verified() ([]record, []error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]record(nil), u.verifies...), append([]error(nil), u.results...)
}

// sharedStorage is a storage root for Caddy instances that act as one
// cluster.
func sharedStorage(t *testing.T) string { return filepath.Join(t.TempDir(), "storage") }

// l3Eventually retries f until it returns true or limit passes.
func l3Eventually(t *testing.T, limit time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answeredHandshake runs a handshake for w's agent at h and answers it
// with cred: the answer is what writes to the nonce store (a handshake
// writes nothing).
func answeredHandshake(ctx context.Context, t *testing.T, h *harness, w *world, cred string, id int) rpcResponse {
	t.Helper()
	hr := agentHandshake(ctx, t, h, w.agent, id)
	return agentVerify(ctx, h, nil, signAnswer(t, w.agent.key, w.agent.did, hr), cred, id)
}
