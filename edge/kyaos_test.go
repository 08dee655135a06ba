package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// The route's DID when nothing is configured: did:web of the Host.
const testAudience = "did:web:" + testHost

// signed returns body with a request proof by p for aud.
func signed(t testing.TB, p party, aud, body string) string {
	t.Helper()
	b, _, err := kyaos.SignRequest([]byte(body), p.priv, kyaos.SignOptions{KID: p.kid, Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// proofCall is a tools/call with a credential for the fixture's agent.
func proofCall(t testing.TB, f fixture, body string) *http.Request {
	r := newRequest(http.MethodPost, "/mcp", body)
	r.Header.Set("Authorization", "Bearer "+f.jwt(t, nil))
	return r
}

type proofRPCErr struct {
	ID    json.RawMessage
	Error struct {
		Code int
		Data struct {
			Reason  string
			Reasons []string
		}
	}
}

func decodeProofRPC(t testing.TB, rec *httptest.ResponseRecorder) proofRPCErr {
	t.Helper()
	var e proofRPCErr
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	return e
}

// TestRequestProofAdmission: what each request_proof mode lets through, the
// refusal a client sees (status, JSON-RPC -31000 and its reason) and that
// nothing refused reaches the upstream.
func TestRequestProofAdmission(t *testing.T) {
	f := newFixture(t)
	stranger := newParty(t)
	valid := signed(t, f.agent, testAudience, toolsCallBody)
	cases := []struct {
		name   string
		mode   string
		body   string
		status int
		reason string // the proof reason in data.reasons; "" admitted
	}{
		{"optional, no proof", "", toolsCallBody, 200, ""},
		{"optional, valid proof", "", valid, 200, ""},
		{"required, valid proof", "required", signed(t, f.agent, testAudience, toolsCallBody), 200, ""},
		{"required, no proof", "required", toolsCallBody, 401, "proof_missing"},
		{"required, server/discover without proof", "required", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, 200, ""},
		{"required, ping without proof", "required", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 200, ""},
		{"arguments changed", "", strings.Replace(signed(t, f.agent, testAudience, toolsCallBody), `"hi"`, `"ho"`, 1), 401, "request_hash_mismatch"},
		{"wrong audience", "", signed(t, f.agent, "did:web:other.example", toolsCallBody), 401, "audience_mismatch"},
		{"not the credential's subject", "", signed(t, stranger, testAudience, toolsCallBody), 403, "delegation_holder_mismatch"},
		{"kid/did forgery", "", strings.Replace(signed(t, stranger, testAudience, toolsCallBody), `"did":"`+stranger.did, `"did":"`+f.agent.did, 1), 401, "kid_did_mismatch"},
		{"off ignores a bad proof", "off", signed(t, f.agent, "did:web:other.example", toolsCallBody), 200, ""},
		{"escaped _meta is read", "", strings.Replace(signed(t, f.agent, "did:web:other.example", toolsCallBody), `"_meta"`, `"\u005fmeta"`, 1), 401, "audience_mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := f.handler(t, func(s *setup) { s.RequestProof = c.mode })
			res := serve(t, h, proofCall(t, f, c.body))
			if res.rec.Code != c.status || res.called != (c.reason == "") {
				t.Fatalf("status %d, upstream called %v: %s", res.rec.Code, res.called, res.rec.Body)
			}
			if c.reason == "" {
				return
			}
			e := decodeProofRPC(t, res.rec)
			want := "proof_invalid"
			if c.reason == "proof_missing" {
				want = "proof_missing"
			}
			if e.Error.Code != -31000 || e.Error.Data.Reason != want || len(e.Error.Data.Reasons) != 1 || e.Error.Data.Reasons[0] != c.reason || string(e.ID) != "1" {
				t.Fatalf("error %s", res.rec.Body)
			}
		})
	}
}

// TestRequestProofReplay: the same proof twice is refused the second time,
// even through another handler sharing the nonce store (a replica).
func TestRequestProofReplay(t *testing.T) {
	f := newFixture(t)
	h1 := f.handler(t, func(c *setup) { c.use(WithNonceStore(sharedStore, "memory")) })
	h2 := f.handler(t, func(c *setup) { c.use(WithNonceStore(sharedStore, "memory")) })
	body := signed(t, f.agent, testAudience, toolsCallBody)
	if res := serve(t, h1, proofCall(t, f, body)); !res.called {
		t.Fatalf("first: %d %s", res.rec.Code, res.rec.Body)
	}
	for _, h := range []*Handler{h1, h2} {
		res := serve(t, h, proofCall(t, f, body))
		if res.called || res.rec.Code != 401 || decodeProofRPC(t, res.rec).Error.Data.Reasons[0] != "nonce_replayed" {
			t.Fatalf("replay: %d %s", res.rec.Code, res.rec.Body)
		}
	}
}

// markerless is a nonce store without single-use markers (a store module
// of another kind): only its NonceStore methods show.
type markerless struct{ challenge.NonceStore }

// markersDown is a memory store whose markers cannot be used.
type markersDown struct{ *challenge.MemoryStore }

func (markersDown) UseOnce(context.Context, [32]byte, time.Duration) error {
	return fmt.Errorf("%w: dial tcp: refused", challenge.ErrStoreUnavailable)
}

// TestRequestProofNonceStores: a proof's nonce is a single-use marker in a
// store that keeps them (memory, Redis), a record in any other; either
// way a replay is refused, the use is measured as a "put", and a store
// that cannot be used refuses the proof with 503.
func TestRequestProofNonceStores(t *testing.T) {
	f := newFixture(t)
	redis := redistest.Start(t)
	memory := func() *challenge.MemoryStore {
		m := challenge.NewMemoryStore(context.Background())
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	const ns = "caddy_mcpi_nonce_store_duration_seconds"
	for _, c := range []struct {
		name  string
		store func() challenge.NonceStore
		held  func(challenge.NonceStore) (markers, records int)
	}{
		{"memory", func() challenge.NonceStore { return memory() },
			func(s challenge.NonceStore) (int, int) {
				m := s.(*challenge.MemoryStore)
				return m.SingleUses(), m.Len()
			}},
		{"markerless", func() challenge.NonceStore { return markerless{memory()} },
			func(s challenge.NonceStore) (int, int) {
				m := s.(markerless).NonceStore.(*challenge.MemoryStore)
				return m.SingleUses(), m.Len()
			}},
		{"redis", func() challenge.NonceStore { return redisStore(t, redis.Addr(), 0) }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := c.store()
			reg, gather := obsContext(t)
			h, _ := obsHandler(t, reg, f, useStore(store, c.name))
			body := signed(t, f.agent, testAudience, toolsCallBody)
			if res := serve(t, h, proofCall(t, f, body)); !res.called {
				t.Fatalf("first: %d %s", res.rec.Code, res.rec.Body)
			}
			res := serve(t, h, proofCall(t, f, body))
			if res.called || res.rec.Code != 401 || decodeProofRPC(t, res.rec).Error.Data.Reasons[0] != "nonce_replayed" {
				t.Fatalf("replay: %d %s", res.rec.Code, res.rec.Body)
			}
			if c.held != nil {
				wantMarkers := 1
				if c.name == "markerless" {
					wantMarkers = 0
				}
				if markers, records := c.held(store); markers != wantMarkers || records != 1-wantMarkers {
					t.Errorf("store holds %d markers, %d records; want %d, %d", markers, records, wantMarkers, 1-wantMarkers)
				}
			}
			// Redis remembers the marker it wrote, and the replay is
			// refused from that memory, before any store operation.
			want := 2.0
			if c.name == "redis" {
				want = 1
			}
			if got := observetest.Value(observetest.Gather(t, gather), ns, "store", c.name, "op", "put", "result", "ok"); got != want {
				t.Errorf("%s{%s,put,ok} = %v, want %v (the use, and the replay unless refused locally)", ns, c.name, got, want)
			}
		})
	}
	t.Run("store down", func(t *testing.T) {
		reg, gather := obsContext(t)
		h, _ := obsHandler(t, reg, f, useStore(markersDown{memory()}, "redis"))
		res := serve(t, h, proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody)))
		if res.called || res.rec.Code != 503 || decodeProofRPC(t, res.rec).Error.Data.Reasons[0] != "nonce_store_unavailable" {
			t.Fatalf("store down: %d %s", res.rec.Code, res.rec.Body)
		}
		if got := observetest.Value(observetest.Gather(t, gather), ns, "store", "redis", "op", "put", "result", "error"); got != 1 {
			t.Errorf("%s{redis,put,error} = %v, want 1", ns, got)
		}
	})
}

// TestProofBearingBodyUnchanged: the upstream gets the proof-bearing body
// byte for byte, a body carrier in it included (the proof covers it); the
// credential header is still removed.
func TestProofBearingBodyUnchanged(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	jwt := f.jwt(t, nil)
	body := signed(t, f.agent, testAudience, bodyWith(t, "_mcpi_delegation", jwt, true))
	r := newRequest(http.MethodPost, "/mcp", body)
	r.Header.Set("Authorization", "Bearer "+jwt)
	res := serve(t, h, r)
	if !res.called || string(res.fwdBody) != body || res.fwd.Header.Get("Authorization") != "" {
		t.Fatalf("forwarded %q (auth %q), sent %q", res.fwdBody, res.fwd.Header.Get("Authorization"), body)
	}
}

// TestRequireExtension: an undeclared client gets -32021 with the exact
// data object and nothing goes upstream; a malformed declaration -32602;
// a declared one passes; server/discover passes undeclared and its result
// declares the extension.
func TestRequireExtension(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.RequireExtension = true })
	decl := func(entry string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"org.kya-os/decentralized-authority":` + entry + `}}}}}`
	}
	res := serve(t, h, proofCall(t, f, toolsCallBody))
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"Missing required client capability: org.kya-os/decentralized-authority","data":{"extension":"org.kya-os/decentralized-authority","reason":"extension_not_declared","requiredCapabilities":{"extensions":{"org.kya-os/decentralized-authority":{}}}}}}`
	if res.called || res.rec.Code != 200 || res.rec.Body.String() != want {
		t.Fatalf("undeclared: %d %s", res.rec.Code, res.rec.Body)
	}
	res = serve(t, h, proofCall(t, f, decl(`{"version":1}`)))
	if e := decodeProofRPC(t, res.rec); res.called || e.Error.Code != -32602 || e.Error.Data.Reason != "malformed_declaration" {
		t.Fatalf("malformed: %s", res.rec.Body)
	}
	if res = serve(t, h, proofCall(t, f, decl(`{}`))); !res.called {
		t.Fatalf("declared: %d %s", res.rec.Code, res.rec.Body)
	}
	// server/discover: exempt, and the answer declares the extension.
	rec := httptest.NewRecorder()
	r := prepareRequest(proofCall(t, f, `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}`), newTestReplacer())
	err := h.ServeNext(rec, r, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, `{"jsonrpc":"2.0","id":2,"result":{"capabilities":{"tools":{}},"serverInfo":{"name":"up"}}}`)
		return err
	})
	var got struct {
		Result struct {
			Capabilities struct {
				Tools      json.RawMessage
				Extensions map[string]struct{ Required bool }
			}
		}
	}
	if err != nil || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got.Result.Capabilities.Tools == nil ||
		!got.Result.Capabilities.Extensions["org.kya-os/decentralized-authority"].Required {
		t.Fatalf("discover: %v %s", err, rec.Body)
	}
}

// TestResponseProofVerifiesAgainstDIDDocument: with response_proof sign,
// the result the client gets carries a proof by the key the edge's own
// did.json publishes, binding the request and the result: under the body
// profile only a result of content alone, any other under the envelope
// profile, so that nothing the agent reads goes unsigned.
func TestResponseProofVerifiesAgainstDIDDocument(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name, mode, result string
		envelope           bool
	}{
		{"content alone", "sign", `{"content":[{"type":"text","text":"hi"}]}`, false},
		{"content and isError", "sign", `{"content":[{"type":"text","text":"hi"}],"isError":false}`, true},
		{"no content", "sign", `{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","url":"https://mcp.example.com/consent","message":"m","elicitationId":"e"}}}}`, true},
		{"envelope asked for", "sign envelope", `{"content":[{"type":"text","text":"hi"}]}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mode, result := c.mode, c.result
			h := f.handler(t, func(c *setup) { c.Level = 2; c.ResponseProof = mode })
			body := signed(t, f.agent, testAudience, toolsCallBody)
			rec := httptest.NewRecorder()
			r := prepareRequest(proofCall(t, f, body), newTestReplacer())
			if err := h.ServeNext(rec, r, func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "application/json")
				_, err := io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":`+result+`}`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var resp struct{ Result json.RawMessage }
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("%v %s", err, rec.Body)
			}
			doc := serve(t, h, newRequest(http.MethodGet, "/.well-known/did.json", ""))
			d, err := didresolver.ParseDocument(doc.rec.Body.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			data := resp.Result
			if !c.envelope {
				var m map[string]json.RawMessage
				_ = json.Unmarshal(resp.Result, &m)
				data = m["content"]
			}
			p, err := kyaos.VerifyResponse(context.Background(), kyaos.FindResponseProof(resp.Result), kyaos.ResponseCheck{
				Resolver: staticDoc{d}, ExpectedSigner: testAudience, ExpectedAudiences: []string{f.agent.did},
				Request: []byte(body), Response: data,
			})
			if err != nil {
				t.Fatalf("%v: %s", err, resp.Result)
			}
			if c.envelope != (p.Meta.Prf == kyaos.ProfileEnvelope) || p.Meta.ResponseHash == "" {
				t.Fatalf("profile %q", p.Meta.Prf)
			}
		})
	}
}

type staticDoc struct{ d *didresolver.Document }

func (s staticDoc) Resolve(context.Context, string) (*didresolver.Document, error) { return s.d, nil }

// TestResponseProofNeedsLevel2: signing needs the edge's key and did.json.
func TestResponseProofNeedsLevel2(t *testing.T) {
	cfg := Config{TrustedIssuers: []string{"*"}, ProofConfig: ProofConfig{ResponseProof: "sign"}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("response_proof at level 1 accepted")
	}
	cfg.ProofConfig = ProofConfig{RequestProof: "sometimes"}
	if err := cfg.Validate(); err == nil {
		t.Fatal("bad request_proof accepted")
	}
}

// TestRequireExtensionLegacySession: a 2025-11-25 client declares once,
// in initialize; its session's later requests count as declared, another
// session's do not, and an undeclared initialize is refused.
func TestRequireExtensionLegacySession(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.RequireExtension = true })
	initialize := func(caps string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := prepareRequest(proofCall(t, f, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"c","version":"1"}}}`), newTestReplacer())
		if err := h.ServeNext(rec, r, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Mcp-Session-Id", "sess-declared")
			w.Header().Set("Content-Type", "application/json")
			_, err := io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{}}`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := initialize(`{}`); !strings.Contains(rec.Body.String(), "-32021") {
		t.Fatalf("undeclared initialize: %s", rec.Body)
	}
	if rec := initialize(`{"extensions":{"org.kya-os/decentralized-authority":{"version":"1.0.0"}}}`); rec.Header().Get("Mcp-Session-Id") != "sess-declared" || strings.Contains(rec.Body.String(), "error") {
		t.Fatalf("declared initialize: %s", rec.Body)
	}
	for sid, admitted := range map[string]bool{"sess-declared": true, "sess-other": false} {
		r := proofCall(t, f, toolsCallBody)
		r.Header.Set("Mcp-Session-Id", sid)
		if res := serve(t, h, r); res.called != admitted {
			t.Fatalf("%s: upstream called %v: %s", sid, res.called, res.rec.Body)
		}
	}
}

// TestProofAudienceFollowsConfiguredAudiences: with audience configured
// and no edge_did, a proof is addressed to the Host's did:web only when
// those audiences name that Host; a proof for another server, sent with
// that server's name in Host, is refused and never forwarded.
func TestProofAudienceFollowsConfiguredAudiences(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) {
		c.RequestProof = "required"
		c.Audiences = []string{"https://" + testHost}
	})
	for _, c := range []struct {
		name, host, aud string
		status          int
	}{
		{"named host", testHost, testAudience, http.StatusOK},
		{"foreign host", "evil.test", "did:web:evil.test", http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := proofCall(t, f, signed(t, f.agent, c.aud, toolsCallBody))
			r.Host = c.host
			res := serve(t, h, r)
			if res.rec.Code != c.status || res.called != (c.status == http.StatusOK) {
				t.Fatalf("%d forwarded %v: %s", res.rec.Code, res.called, res.rec.Body)
			}
			if c.status != http.StatusOK {
				if got := decodeProofRPC(t, res.rec).Error.Data.Reasons; len(got) != 1 || got[0] != "audience_mismatch" {
					t.Fatalf("reasons = %v, want [audience_mismatch]", got)
				}
			}
		})
	}
}

// TestProofAmbiguousNumberRefused: a proof over 2^53 does not carry a
// body whose integer was swapped for 2^53+1 (the same double under JCS):
// 401 request_hash_ambiguous_number, nothing forwarded. The signed body
// itself passes byte for byte.
func TestProofAmbiguousNumberRefused(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.RequestProof = "required" })
	body := signed(t, f.agent, testAudience, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":9007199254740992}}}`)
	swapped := strings.Replace(body, "9007199254740992", "9007199254740993", 1)
	res := serve(t, h, proofCall(t, f, swapped))
	if res.called || res.rec.Code != http.StatusUnauthorized {
		t.Fatalf("swapped: %d forwarded %v: %s", res.rec.Code, res.called, res.rec.Body)
	}
	if got := decodeProofRPC(t, res.rec).Error.Data.Reasons; len(got) != 1 || got[0] != "request_hash_ambiguous_number" {
		t.Fatalf("swapped: reasons %v", got)
	}
	if res := serve(t, h, proofCall(t, f, body)); !res.called || string(res.fwdBody) != body {
		t.Fatalf("signed: %d %s", res.rec.Code, res.rec.Body)
	}
}
