package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// jsonRPCUpstream answers every JSON-RPC request with a JSON result, as a
// stateless 2026 server does, and server/discover with its capabilities.
func jsonRPCUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage
			Method string
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &msg) != nil {
			http.Error(w, "bad", 400)
			return
		}
		result := `{"content":[{"type":"text","text":"done"}],"isError":false}`
		if msg.Method == "server/discover" {
			result = `{"capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
	})
}

const kyaosCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer","arguments":{"amount":"42.00","to":"did:web:merchant.example"}}}`

// sendRaw posts body as it is, with the credential in the KYA-OS header.
func sendRaw(ctx context.Context, t *testing.T, h *harness, cred, body string) rpcResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("KYA-OS-Delegation-Credential", cred)
	return h.do(req)
}

func proveAs(t *testing.T, p party, aud string, now time.Time, body string) string {
	t.Helper()
	b, _, err := kyaos.SignRequest([]byte(body), p.key, kyaos.SignOptions{KID: p.kid, Audience: aud, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// proofRefusal checks a -31000 refusal: its HTTP status, its reason, and
// that nothing reached the upstream.
func proofRefusal(t *testing.T, h *harness, resp rpcResponse, status int, reason string) {
	t.Helper()
	var m struct {
		Error struct {
			Code int
			Data struct{ Reasons []string }
		}
	}
	if err := json.Unmarshal(resp.Body, &m); err != nil || resp.Status != status || m.Error.Code != -31000 ||
		len(m.Error.Data.Reasons) != 1 || m.Error.Data.Reasons[0] != reason {
		t.Fatalf("want %d %s, got %d %s", status, reason, resp.Status, resp.Body)
	}
	if n := len(h.upstream.Requests()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}

// TestKYAOSRequestProofs: through the real Caddy with request_proof
// required and signed responses: what is admitted (byte for byte), what is
// refused and why, and a response proof that verifies against the edge's
// own did.json and binds the request and the result.
func TestKYAOSRequestProofs(t *testing.T) {
	h := startL3Edge(t, "level 2\nrequest_proof required\nresponse_proof sign", jsonRPCUpstream(), sharedStorage(t))
	w := newWorld(t, h)
	cred := w.jwt(t)
	ctx := testContext(t)
	aud := h.hostAudience()
	now := time.Now()

	valid := proveAs(t, w.agent, aud, now, kyaosCall)
	resp := sendRaw(ctx, t, h, cred, valid)
	if resp.Status != 200 {
		t.Fatalf("valid proof: %d %s", resp.Status, resp.Body)
	}
	reqs := h.upstream.Requests()
	if len(reqs) != 1 || string(reqs[0].Body) != valid || reqs[0].Header.Get("KYA-OS-Delegation-Credential") != "" {
		t.Fatalf("upstream got %d requests: %+v", len(reqs), reqs)
	}
	// The response proof verifies with the key of the edge's did.json.
	docResp, err := http.Get(h.base + "/.well-known/did.json")
	if err != nil {
		t.Fatal(err)
	}
	docBody, _ := io.ReadAll(docResp.Body)
	docResp.Body.Close()
	doc, err := didresolver.ParseDocument(docBody)
	if err != nil {
		t.Fatalf("did.json: %v %s", err, docBody)
	}
	var out struct{ Result json.RawMessage }
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		t.Fatal(err)
	}
	// The result holds isError besides content: signed under the envelope
	// profile, which binds the whole result minus _meta.
	if p, err := kyaos.VerifyResponse(ctx, kyaos.FindResponseProof(out.Result), kyaos.ResponseCheck{
		Resolver: fixedDoc{doc}, ExpectedSigner: aud, ExpectedAudiences: []string{w.agent.did},
		Request: []byte(valid), Response: out.Result,
	}); err != nil || p.Meta.Prf != kyaos.ProfileEnvelope {
		t.Fatalf("response proof: %v\n%s", err, out.Result)
	}

	stranger := newParty(t, didresolver.Ed25519)
	cases := []struct {
		name, body string
		status     int
		reason     string
	}{
		{"same proof again", valid, 401, "nonce_replayed"},
		{"arguments changed after signing", strings.Replace(proveAs(t, w.agent, aud, now, kyaosCall), "42.00", "9999.00", 1), 401, "request_hash_mismatch"},
		{"wrong audience", proveAs(t, w.agent, "did:web:elsewhere.example", now, kyaosCall), 401, "audience_mismatch"},
		{"expired", proveAs(t, w.agent, aud, now.Add(-2*time.Minute), kyaosCall), 401, "expired"},
		{"window over 60s", strings.Replace(proveAs(t, w.agent, aud, now, kyaosCall), `"expires":`, `"expires":1`, 1), 401, "ttl_too_long"},
		{"kid/did forgery", strings.Replace(proveAs(t, stranger, aud, now, kyaosCall), `"did":"`+stranger.did, `"did":"`+w.agent.did, 1), 401, "kid_did_mismatch"},
		{"key not the credential's subject", proveAs(t, stranger, aud, now, kyaosCall), 403, "delegation_holder_mismatch"},
		{"missing proof", kyaosCall, 401, "proof_missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.upstream.Reset()
			proofRefusal(t, h, sendRaw(ctx, t, h, cred, c.body), c.status, c.reason)
		})
	}
}

type fixedDoc struct{ d *didresolver.Document }

func (f fixedDoc) Resolve(context.Context, string) (*didresolver.Document, error) { return f.d, nil }

// TestKYAOSRequireExtension: an undeclared client gets -32021 and nothing
// goes upstream; server/discover passes undeclared, and its result
// declares the extension; a declared client passes.
func TestKYAOSRequireExtension(t *testing.T) {
	h := startL3Edge(t, "require_extension", jsonRPCUpstream(), sharedStorage(t))
	w := newWorld(t, h)
	cred := w.jwt(t)
	ctx := testContext(t)

	resp := sendRaw(ctx, t, h, cred, kyaosCall)
	if resp.rpcError(t, 1) != -32021 || len(h.upstream.Requests()) != 0 {
		t.Fatalf("undeclared: %d %s", resp.Status, resp.Body)
	}
	resp = sendRaw(ctx, t, h, cred, `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}`)
	ext, _ := resp.result(t, 2)["capabilities"].(map[string]any)["extensions"].(map[string]any)
	if _, ok := ext["org.kya-os/decentralized-authority"]; !ok || len(h.upstream.Requests()) != 1 {
		t.Fatalf("discover: %s", resp.Body)
	}
	declared := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"transfer","arguments":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"org.kya-os/decentralized-authority":{}}}}}}`
	if resp = sendRaw(ctx, t, h, cred, declared); resp.rpcError(t, 3) != 0 {
		t.Fatalf("declared: %s", resp.Body)
	}
}

// TestKYAOSReplayAcrossReplicas: two Caddy instances sharing a real Redis
// nonce store: a proof admitted by one is refused by the other.
func TestKYAOSReplayAcrossReplicas(t *testing.T) {
	redis := redistest.Start(t)
	storage := sharedStorage(t)
	extra := "level 2\nedge_did did:web:mcp.example.test\nrequest_proof required\nnonce_store redis " + redis.URL()
	a := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	b := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	w := newWorld(t, a)
	cred := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} })
	ctx := testContext(t)
	body := proveAs(t, w.agent, "did:web:mcp.example.test", time.Now(), kyaosCall)
	if resp := sendRaw(ctx, t, a, cred, body); resp.Status != 200 {
		t.Fatalf("first: %d %s", resp.Status, resp.Body)
	}
	proofRefusal(t, b, sendRaw(ctx, t, b, cred, body), 401, "nonce_replayed")
}
