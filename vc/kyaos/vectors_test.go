package kyaos

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

type cardVector struct {
	ID       string `json:"id"`
	Expected string `json:"expected"`
	Input    struct {
		Proof            json.RawMessage                 `json:"proof"`
		Request          json.RawMessage                 `json:"request"`
		JWKS             struct{ Keys []map[string]any } `json:"jwks"`
		ExpectedAudience string                          `json:"expectedAudience"`
		NowMs            int64                           `json:"nowMs"`
		SkewSeconds      int                             `json:"skewSeconds"`
		OmitNonceSeam    bool                            `json:"omitNonceSeam"`
	} `json:"input"`
}

// withProof puts raw under params._meta[key] of the vector's request, the
// way the proof travels.
func withProof(t *testing.T, request, raw json.RawMessage, key string) []byte {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal(request, &req); err != nil {
		t.Fatal(err)
	}
	params, _ := req["params"].(map[string]any)
	params["_meta"] = map[string]any{key: raw}
	req["jsonrpc"], req["id"] = "2.0", 1
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCardProofVectors runs every vector of card-proof.json through the
// verifier, each with its outcome and the step that decides it (KYA-OS
// §3.8). The proof rides in the legacy key the vectors name, and then in
// the canonical one.
func TestCardProofVectors(t *testing.T) {
	var file struct{ Vectors []cardVector }
	loadVectors(t, "card-proof.json", &file)
	want := map[string]struct {
		reason Reason
		step   int
	}{
		"card-proof/valid":              {},
		"card-proof/tampered-body":      {RequestHashMismatch, StepHash},
		"card-proof/tampered-signature": {InvalidSignature, StepSignature},
		"card-proof/wrong-audience":     {AudienceMismatch, StepAudience},
		"card-proof/expired":            {Expired, StepWindow},
		"card-proof/kid-did-forgery":    {KidDIDMismatch, StepKidDID},
		"card-proof/nonce-seam-missing": {NonceSeamMissing, StepNonce},
	}
	if len(file.Vectors) != len(want) {
		t.Fatalf("%d vectors, want %d", len(file.Vectors), len(want))
	}
	for _, key := range []string{LegacyProofKey, ProofKey} {
		for _, v := range file.Vectors {
			t.Run(key+"/"+v.ID, func(t *testing.T) {
				w, ok := want[v.ID]
				if !ok {
					t.Fatalf("unmapped vector %s", v.ID)
				}
				if (w.reason == "") != (v.Expected == "pass") {
					t.Fatalf("table disagrees with expected %q", v.Expected)
				}
				in := v.Input
				did := "did:web:example.com:agents:acme-pay"
				res := docResolver{docs: map[string]*didresolver.Document{
					did: jwkDocument(t, did, "authentication", in.JWKS.Keys...),
				}}
				var nonces NonceStore = &memNonces{}
				if in.OmitNonceSeam {
					nonces = nil
				}
				ver := NewVerifier(res, nonces, WithClock(fixedClock(in.NowMs/1000)))
				body := withProof(t, in.Request, in.Proof, key)
				got, err := ver.Verify(context.Background(), Request{Body: body, Audience: in.ExpectedAudience})
				if w.reason == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if got.Proof.DID != did || got.Key.ID != did+"#key-1" || !got.UnfusedCnf {
						t.Fatalf("result %+v", got)
					}
					// The nonce is spent: the same proof again is a replay.
					if _, err := ver.Verify(context.Background(), Request{Body: body, Audience: in.ExpectedAudience}); ReasonOf(err) != NonceReplayed {
						t.Fatalf("replay: %v", err)
					}
					return
				}
				if ReasonOf(err) != w.reason || StepOf(err) != w.step {
					t.Fatalf("got %v (step %d), want %s at step %d", err, StepOf(err), w.reason, w.step)
				}
			})
		}
	}
}

// TestCardProofRequestHash checks the §3.2 hash against the contract's
// worked example.
func TestCardProofRequestHash(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"x":1},"name":"payments.transfer","arguments":{"to":"did:web:merchant.example","amount":"42.00","currency":"USD"}}}`
	got, err := RequestHash([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha-256=:T8jgo0TvEQ6oN092KUuE35oSWKt/19cUxydyYbD2qis=:"; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}
