package challenge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func FuzzParseRequest(f *testing.F) {
	seeds := []string{
		req("handshake", `{"agentDid":"`+testDID+`","supportedMethods":["Ed25519","secp256k1"],"version":"1.0"}`),
		req("verify", `{"signedChallenge":`+validSC+`,"credential":"eyJhbGciOiJFZERTQSJ9.e30.c2ln"}`),
		req("verify", `{"signedChallenge":`+validSC+`,"credential":{"proof":{}}}`),
		req("handshake", `{"nonce":"abc","audience":"did:web:srv","timestamp":1737455400,"agentDid":"`+testDID+`","clientInfo":{"name":"Claude"}}`),
		req("tools/call", `{"name":"x"}`),
		`[{"jsonrpc":"2.0","id":1,"method":"handshake"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"verify","params":[]}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"verify","params":{}}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"handshake","params":{"agentDid":"did:a:\u0000"}}`,
		``, `null`, `{`, `{"jsonrpc":"2.0","id":1,"method":"verify","params":{"signedChallenge":{"timestamp":99999999999999999999}}}`,
		// Repeated and case-folded member names.
		req("verify", `{"signedChallenge":`+validSC+`,"credential":"x","Credential":"y"}`),
		req("verify", `{"signedChallenge":`+validSC+`,"credential":"x","credential":"y"}`),
		req("verify", `{"ſignedChallenge":`+validSC+`,"signedChallenge":`+validSC+`,"credential":"x"}`),
		req("handshake", `{"agentDid":"`+testDID+`","AGENTDID":"did:key:z"}`),
		`{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"` + testDID + `"},"paramſ":{"agentDid":"did:key:z"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"nonce":"n","\u212aey":1,"key":2}}`,
		// Repeats nested in params.
		req("verify", `{"signedChallenge":`+validSC+`,"credential":{"credentialSubject":{},"credentialSubject":{}}}`),
		req("handshake", `{"nonce":"abc","clientInfo":{"name":"a","Name":"b"}}`),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseRequest(data, 4096)
		legacy := IsLegacyHandshake(data)
		if err != nil {
			code := Code(err)
			if code == CodeInternalError {
				t.Fatalf("untyped parse error %v", err)
			}
			if c != nil && !isJSONString(c.ID) && !isJSONNumber(c.ID) {
				t.Fatalf("Call with bad id %q", c.ID)
			}
			raw, merr := json.Marshal(ErrorResponse(idOf(c), err))
			if merr != nil || !json.Valid(raw) {
				t.Fatalf("error response not JSON: %v", merr)
			}
			return
		}
		if len(data) > 4096 {
			t.Fatal("accepted an oversized request")
		}
		switch c.Kind {
		case KindHandshake:
			if c.Handshake == nil || c.Handshake.validate() != nil || legacy {
				t.Fatalf("bad handshake call %+v", c)
			}
		case KindVerify:
			if c.Verify == nil || c.Verify.validate() != nil {
				t.Fatalf("bad verify call %+v", c)
			}
			// A proxy forwards what it accepted: an encoding/json upstream
			// must read the very values checked here.
			var up struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					SignedChallenge struct {
						Challenge, Nonce, AgentDID, ProofValue string
						Timestamp                              json.RawMessage
					} `json:"signedChallenge"`
					Credential json.RawMessage `json:"credential"`
				} `json:"params"`
			}
			if err := json.Unmarshal(data, &up); err != nil {
				t.Fatalf("accepted a verify encoding/json cannot read: %v", err)
			}
			sc, usc := c.Verify.SignedChallenge, up.Params.SignedChallenge
			if up.Method != c.Method || string(up.ID) != string(c.ID) ||
				!sameJSON(up.Params.Credential, c.Verify.Credential) || usc.Challenge != sc.Challenge ||
				usc.Nonce != sc.Nonce || usc.AgentDID != sc.AgentDID || usc.ProofValue != sc.ProofValue ||
				!sameJSON(usc.Timestamp, json.RawMessage(sc.Timestamp)) {
				t.Fatalf("encoding/json reads another verify than the edge: %+v vs %+v", up, c.Verify)
			}
		case KindLegacyHandshake:
			if !legacy {
				t.Fatal("legacy kind without IsLegacyHandshake")
			}
		default:
			t.Fatalf("kind %d", c.Kind)
		}
	})
}

// sameJSON compares two raw values byte for byte, surrounding space aside.
func sameJSON(a, b json.RawMessage) bool {
	return string(bytes.TrimSpace(a)) == string(bytes.TrimSpace(b))
}

func idOf(c *Call) json.RawMessage {
	if c == nil {
		return nil
	}
	return c.ID
}

// FuzzVerifyParams parses verify params and, when they parse, runs them
// through a real Service (did:key resolution only, no network): no input may
// verify, panic or produce an untyped error.
func FuzzVerifyParams(f *testing.F) {
	fx := newFixture(f)
	a := newAgent(f, "ed25519")
	hr := fx.issue(f, a)
	sc := answer(f, a, hr, TimestampRFC3339(fx.clock.Now()))
	good, _ := json.Marshal(VerifyParams{SignedChallenge: sc, Credential: json.RawMessage(`"e30.e30.e30"`)})
	seeds := []string{
		string(good),
		`{"signedChallenge":` + validSC + `,"credential":"x"}`,
		`{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1737455400000,"agentDid":"` + testDID + `","proofValue":"u` + "AAAA" + `","x":[1,{"b":null}]},"credential":{}}`,
		`{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":"2025-06-15T18:30:45+02:00","agentDid":"did:web:x","proofValue":"zz"},"credential":"a"}`,
		`{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1,"agentDid":"did:key:z","proofValue":"z1","e":1e400},"credential":"a"}`,
		`{"signedChallenge":null,"credential":null}`,
		`[]`, `{}`, `"x"`,
		`{"signedChallenge":` + validSC + `,"credential":"x","Credential":"y"}`,
		`{"signedChallenge":{"challenge":"c","nonce":"n","nonce":"m","timestamp":1,"agentDid":"` + testDID + `","proofValue":"z1"},"credential":"x"}`,
		`{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1,"agentDid":"` + testDID + `","proofValue":"z1","ext":1,"Ext":2},"credential":"x"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseVerifyParams(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("parse error not ErrInvalidParams: %v", err)
			}
			return
		}
		if _, err := p.SignedChallenge.Timestamp.Time(); err != nil {
			t.Fatalf("accepted params with a bad timestamp: %v", err)
		}
		// Wire round trip keeps every signed member.
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := ParseVerifyParams(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		m1, err1 := p.SignedChallenge.SigningInput()
		m2, err2 := back.SignedChallenge.SigningInput()
		if (err1 == nil) != (err2 == nil) || string(m1) != string(m2) {
			t.Fatalf("signing input changed by a round trip: %s vs %s", m1, m2)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := fx.svc.Verify(cctx, *p)
		if err == nil || v != nil {
			t.Fatalf("fuzzed params verified: %+v", v)
		}
		if Code(err) == CodeInternalError {
			t.Fatalf("untyped verify error: %v", err)
		}
	})
}
