package kyaos

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestSignedProofVectors runs signed-proof.json (docs/protocol/kyaos.md#vectors): each
// vector's outcome and the step that decides it.
func TestSignedProofVectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			ID       string
			Expected string
			Input    struct {
				Proof        json.RawMessage
				PublicKeyJwk struct{ X string }
				Now          int64
				SkewSeconds  int
				Expected     *struct {
					Request  json.RawMessage
					Response struct{ Data json.RawMessage }
				}
			}
		}
	}
	loadVectors(t, "signed-proof.json", &file)
	want := map[string]struct {
		code Reason
		step int
	}{
		"signed-proof/valid-basic":                          {},
		"signed-proof/tampered-signature":                   {InvalidJWSSignature, RStepSignature},
		"signed-proof/tampered-meta":                        {InvalidJWSSignature, RStepSignature},
		"signed-proof/wrong-key":                            {InvalidJWSSignature, RStepSignature},
		"signed-proof/timestamp-skew-exceeded":              {TimestampSkewExceeded, RStepTime},
		"signed-proof/envelope-binding":                     {},
		"signed-proof/envelope-tampered-structured-content": {ContentBindingMismatch, RStepContent},
		"signed-proof/prf-stripped-downgrade":               {InvalidJWSSignature, RStepSignature},
		"signed-proof/unknown-profile":                      {InvalidProofStructure, RStepStructure},
	}
	if len(file.Vectors) != len(want) {
		t.Fatalf("%d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.ID, func(t *testing.T) {
			w, ok := want[v.ID]
			if !ok || (w.code == "") != (v.Expected == "pass") {
				t.Fatalf("table disagrees with %q", v.Expected)
			}
			x, err := base64.RawURLEncoding.DecodeString(v.Input.PublicKeyJwk.X)
			if err != nil {
				t.Fatal(err)
			}
			c := ResponseCheck{
				Key:               ed25519.PublicKey(x),
				Now:               time.Unix(v.Input.Now, 0),
				Skew:              time.Duration(v.Input.SkewSeconds) * time.Second,
				ExpectedAudiences: []string{"did:web:server.example.com"},
				Nonces:            &memNonces{},
			}
			if e := v.Input.Expected; e != nil {
				c.Request, c.Response = e.Request, e.Response.Data
			}
			_, err = VerifyResponse(context.Background(), v.Input.Proof, c)
			if ReasonOf(err) != w.code && !(w.code == "" && err == nil) || StepOf(err) != w.step {
				t.Fatalf("got %v (step %d), want %q at %d", err, StepOf(err), w.code, w.step)
			}
		})
	}
}

// TestResponseHashes checks two worked hashes of the response-proof request and response hashes.
func TestResponseHashes(t *testing.T) {
	h, err := ResponseRequestHash([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"hi","_kyaos_proof":{}},"_meta":{"a":1}}}`))
	if err != nil || h != "sha256:c8f3d59959c9247211de8c76b94ef17f0c279f09362350ced67f69ecdb89d6c7" {
		t.Fatalf("request hash %s %v", h, err)
	}
	h, err = ResponseHash([]byte(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"msg":"hi"},"isError":false,"resultType":"complete","_meta":{"x":1}}`), ProfileEnvelope)
	if err != nil || !strings.HasPrefix(h, "sha256:9505edd5") {
		t.Fatalf("envelope hash %s %v", h, err)
	}
}

// TestSignResultRoundTrip: a result the edge signs verifies against its key
// and binds the request and the result, under both profiles; editing the
// result outside _meta breaks the binding.
func TestSignResultRoundTrip(t *testing.T) {
	priv, _ := didresolver.GenerateKey(didresolver.Ed25519)
	key := priv.(ed25519.PrivateKey)
	edge := "did:web:edge.example"
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"hi"}}}`)
	result := []byte(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"msg":"hi"},"isError":false}`)
	now := time.Unix(1_800_000_000, 0)
	for _, env := range []bool{false, true} {
		s := ResponseSigner{Key: key, DID: edge, KID: edge + "#k", Envelope: env}
		signed, err := s.SignResult(result, req, "did:key:zAgent", ResponseMeta{}, now.Unix())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(signed), `{"content":[{"type":"text","text":"hi"}],"structuredContent":{"msg":"hi"},"isError":false,`) {
			t.Fatalf("result changed: %s", signed)
		}
		data := func(r []byte) []byte {
			if env {
				return r
			}
			var m map[string]json.RawMessage
			_ = json.Unmarshal(r, &m)
			return m["content"]
		}
		check := ResponseCheck{Key: key.Public(), Now: now, ExpectedSigner: edge, ExpectedAudiences: []string{"did:key:zAgent"}, Request: req, Response: data(signed)}
		p, err := VerifyResponse(context.Background(), FindResponseProof(signed), check)
		if err != nil {
			t.Fatalf("envelope=%v: %v", env, err)
		}
		if env != (p.Meta.Prf == ProfileEnvelope) || p.Meta.SessionID == "" || len(p.Meta.Nonce) < 16 {
			t.Fatalf("meta %+v", p.Meta)
		}
		tampered := []byte(strings.Replace(string(signed), `"isError":false`, `"isError":true`, 1))
		check.Response = data(tampered)
		_, err = VerifyResponse(context.Background(), FindResponseProof(tampered), check)
		if env && ReasonOf(err) != ContentBindingMismatch || !env && err != nil {
			t.Fatalf("envelope=%v tampered isError: %v", env, err)
		}
	}
}

// FuzzVerifyResponse: any proof object is read without panicking.
func FuzzVerifyResponse(f *testing.F) {
	f.Add([]byte(`{"jws":"a.b.c","meta":{"did":"d","kid":"d#k","ts":1,"nonce":"n","audience":"a","sessionId":"s","requestHash":"sha256:00"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = VerifyResponse(context.Background(), raw, ResponseCheck{Key: ed25519.PublicKey(make([]byte, 32))})
	})
}
