package challenge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestParseRequestNestedRepeats: a member name repeated in any object
// nested in params is refused like one in params itself, and the same
// message without the repeat is accepted.
func TestParseRequestNestedRepeats(t *testing.T) {
	sc := func(extra string) string {
		return strings.Replace(validSC, `"proofValue"`, extra+`"proofValue"`, 1)
	}
	for _, tc := range []struct {
		name     string
		ok, bad  string // requests without and with the repeat
		wantKind Kind
	}{
		{"handshake: in an unknown member",
			req("handshake", `{"agentDid":"`+testDID+`","ext":{"a":1,"b":2}}`),
			req("handshake", `{"agentDid":"`+testDID+`","ext":{"a":1,"A":2}}`), KindHandshake},
		{"verify: credentialSubject twice in a credential object",
			req("verify", `{"signedChallenge":`+validSC+`,"credential":{"credentialSubject":{"scopes":["a"]},"proof":{}}}`),
			req("verify", `{"signedChallenge":`+validSC+`,"credential":{"credentialSubject":{"scopes":["a","admin"]},"credentialSubject":{"scopes":["a"]},"proof":{}}}`), KindVerify},
		{"verify: Kelvin sign in a credential's proof",
			req("verify", `{"signedChallenge":`+validSC+`,"credential":{"proof":{"k":1}}}`),
			req("verify", `{"signedChallenge":`+validSC+`,"credential":{"proof":{"k":1,"\u212a":2}}}`), KindVerify},
		{"verify: in a signed extra member of signedChallenge",
			req("verify", `{"signedChallenge":`+sc(`"ext":{"x":1},`)+`,"credential":"x"}`),
			req("verify", `{"signedChallenge":`+sc(`"ext":{"x":1,"x":2},`)+`,"credential":"x"}`), KindVerify},
		{"legacy handshake: in clientInfo",
			req("handshake", `{"nonce":"abc","agentDid":"`+testDID+`","clientInfo":{"name":"a"}}`),
			req("handshake", `{"nonce":"abc","agentDid":"`+testDID+`","clientInfo":{"name":"a","Name":"b"}}`), KindLegacyHandshake},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.bad)) {
				t.Fatal("not JSON: the row tests nothing")
			}
			c, err := ParseRequest([]byte(tc.ok), 0)
			if err != nil || c.Kind != tc.wantKind {
				t.Fatalf("without the repeat: %v, %+v", err, c)
			}
			c, err = ParseRequest([]byte(tc.bad), 0)
			if !errors.Is(err, ErrInvalidParams) || !errors.Is(err, ErrRepeatedMember) || Code(err) != CodeInvalidParams {
				t.Fatalf("err = %v (code %d), want ErrInvalidParams with ErrRepeatedMember", err, Code(err))
			}
			if c == nil || string(c.ID) != "1" {
				t.Fatalf("Call = %+v, want id 1 for the error response", c)
			}
			// Not passed through as a legacy handshake either.
			if IsLegacyHandshake([]byte(tc.bad)) {
				t.Fatal("taken for a legacy handshake")
			}
		})
	}
}

// The exported parsers of params and of a signedChallenge refuse nested
// repeats on their own, not only through ParseRequest.
func TestParamsParsersNestedRepeats(t *testing.T) {
	if _, err := ParseHandshakeParams(json.RawMessage(`{"agentDid":"` + testDID + `","x":[{"v":1,"V":2}]}`)); !errors.Is(err, ErrRepeatedMember) {
		t.Errorf("ParseHandshakeParams: %v", err)
	}
	if _, err := ParseVerifyParams(json.RawMessage(`{"signedChallenge":` + validSC + `,"credential":{"a":{"b":1,"b":2}}}`)); !errors.Is(err, ErrRepeatedMember) {
		t.Errorf("ParseVerifyParams: %v", err)
	}
	var sc SignedChallenge
	bad := strings.Replace(validSC, `"proofValue"`, `"ext":{"y":1,"Y":1},"proofValue"`, 1)
	if err := json.Unmarshal([]byte(bad), &sc); !errors.Is(err, ErrRepeatedMember) || !errors.Is(err, ErrInvalidParams) {
		t.Errorf("SignedChallenge.UnmarshalJSON: %v", err)
	}
}
