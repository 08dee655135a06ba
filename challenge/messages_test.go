package challenge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

const testDID = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"

func req(method, params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
}

const validSC = `{"challenge":"a0b1c2","nonce":"n1","timestamp":"2025-06-15T18:30:45Z","agentDid":"` + testDID + `","proofValue":"z6MkhaX"}`

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		max     int
		opts    []ParseOption
		kind    Kind
		wantErr error
		code    int
		id      string // expected Call.ID, "" = no Call
	}{
		{name: "handshake", data: req("handshake", `{"agentDid":"`+testDID+`","supportedMethods":["Ed25519","secp256k1"],"version":"1.0"}`), kind: KindHandshake, id: "1"},
		{name: "handshake agentDid only", data: req("handshake", `{"agentDid":"`+testDID+`"}`), kind: KindHandshake, id: "1"},
		{name: "handshake string id, unknown params member", data: `{"id":"abc","jsonrpc":"2.0","method":"handshake","params":{"agentDid":"` + testDID + `","x":1}}`, kind: KindHandshake, id: `"abc"`},
		{name: "verify JWT credential", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":"eyJhbGciOiJFZERTQSJ9.e30.c2ln"}`), kind: KindVerify, id: "1"},
		{name: "verify JSON credential", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":{"type":["VerifiableCredential"]}}`), kind: KindVerify, id: "1"},
		{name: "verify numeric timestamp", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1737455400000,"agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), kind: KindVerify, id: "1"},
		{name: "legacy handshake", data: req("handshake", `{"nonce":"abc","audience":"did:web:srv","timestamp":1737455400,"agentDid":"`+testDID+`","clientInfo":{"name":"Claude"}}`), kind: KindLegacyHandshake, id: "1"},
		{name: "legacy handshake with renamed methods", opts: []ParseOption{WithMethods("mcpi/handshake", "mcpi/verify")}, data: req("handshake", `{"nonce":"abc","agentDid":"`+testDID+`"}`), kind: KindLegacyHandshake, id: "1"},
		{name: "custom method names", opts: []ParseOption{WithMethods("mcpi/handshake", "mcpi/verify")}, data: req("mcpi/verify", `{"signedChallenge":`+validSC+`,"credential":"x"}`), kind: KindVerify, id: "1"},
		{name: "default name unknown once renamed", opts: []ParseOption{WithMethods("", "mcpi/verify")}, data: req("verify", `{"signedChallenge":`+validSC+`,"credential":"x"}`), wantErr: ErrMethodNotFound, code: -32601, id: "1"},

		{name: "unknown method", data: req("tools/call", `{}`), wantErr: ErrMethodNotFound, code: -32601, id: "1"},
		{name: "not JSON", data: `{"jsonrpc":"2.0",`, wantErr: ErrParse, code: -32700},
		{name: "empty", data: ``, wantErr: ErrParse, code: -32700},
		{name: "batch", data: `[` + req("handshake", `{"agentDid":"`+testDID+`"}`) + `]`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "scalar", data: `"handshake"`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "notification", data: `{"jsonrpc":"2.0","method":"handshake","params":{"agentDid":"` + testDID + `"}}`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "object id", data: `{"jsonrpc":"2.0","id":{},"method":"handshake","params":{}}`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "null id", data: `{"jsonrpc":"2.0","id":null,"method":"handshake","params":{}}`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "jsonrpc 1.0", data: `{"jsonrpc":"1.0","id":1,"method":"handshake","params":{"agentDid":"` + testDID + `"}}`, wantErr: ErrInvalidRequest, code: -32600, id: "1"},
		{name: "jsonrpc missing", data: `{"id":1,"method":"handshake","params":{"agentDid":"` + testDID + `"}}`, wantErr: ErrInvalidRequest, code: -32600, id: "1"},
		{name: "extra member", data: `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"` + testDID + `"},"x":1}`, wantErr: ErrInvalidRequest, code: -32600, id: "1"},
		{name: "method not a string", data: `{"jsonrpc":"2.0","id":1,"method":7}`, wantErr: ErrInvalidRequest, code: -32600, id: "1"},
		{name: "too large", data: req("handshake", `{"agentDid":"`+testDID+`"}`), max: 20, wantErr: ErrInvalidRequest, code: -32600},
		{name: "default size limit", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":"`+strings.Repeat("a", DefaultMaxRequestSize)+`"}`), wantErr: ErrInvalidRequest, code: -32600},

		{name: "params missing", data: `{"jsonrpc":"2.0","id":1,"method":"handshake"}`, wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "params array", data: req("handshake", `["`+testDID+`"]`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "agentDid missing", data: req("handshake", `{"supportedMethods":["Ed25519"]}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "agentDid number", data: req("handshake", `{"agentDid":5}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "agentDid null", data: req("handshake", `{"agentDid":null}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "agentDid not a DID", data: req("handshake", `{"agentDid":"agent456"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "agentDid too long", data: req("handshake", `{"agentDid":"did:web:`+strings.Repeat("a", 2048)+`"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "supportedMethods string", data: req("handshake", `{"agentDid":"`+testDID+`","supportedMethods":"Ed25519"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "supportedMethods mixed", data: req("handshake", `{"agentDid":"`+testDID+`","supportedMethods":["Ed25519",1]}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "version number", data: req("handshake", `{"agentDid":"`+testDID+`","version":1.0}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "signedChallenge missing", data: req("verify", `{"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "signedChallenge string", data: req("verify", `{"signedChallenge":"x","credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "credential missing", data: req("verify", `{"signedChallenge":`+validSC+`}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "credential number", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":5}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "credential empty", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":""}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "credential null", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":null}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "proofValue missing", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":"2025-06-15T18:30:45Z","agentDid":"`+testDID+`"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "timestamp missing", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "timestamp bool", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":true,"agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "timestamp not RFC 3339", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":"June 15","agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "timestamp fractional number", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1.5,"agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "challenge number", data: req("verify", `{"signedChallenge":{"challenge":1,"nonce":"n","timestamp":1,"agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "challenge oversized", data: req("verify", `{"signedChallenge":{"challenge":"`+strings.Repeat("c", 513)+`","nonce":"n","timestamp":1,"agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "nonce with space", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"a b","timestamp":1,"agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "proofValue oversized", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1,"agentDid":"`+testDID+`","proofValue":"`+strings.Repeat("z", 513)+`"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},

		// Repeated or case-folded member names: an upstream decoding the
		// forwarded request with encoding/json would read another value.
		{name: "top-level method repeated", data: `{"jsonrpc":"2.0","id":1,"method":"verify","method":"handshake","params":{"agentDid":"` + testDID + `"}}`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "top-level id repeated", data: `{"jsonrpc":"2.0","id":1,"id":2,"method":"handshake","params":{"agentDid":"` + testDID + `"}}`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "top-level Method variant", data: `{"jsonrpc":"2.0","id":1,"method":"handshake","Method":"verify","params":{"agentDid":"` + testDID + `"}}`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "top-level params folded (U+017F)", data: `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"` + testDID + `"},"paramſ":{"agentDid":"did:key:other"}}`, wantErr: ErrInvalidRequest, code: -32600},
		{name: "verify credential and Credential", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":"x","Credential":"y"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "verify Credential before credential", data: req("verify", `{"signedChallenge":`+validSC+`,"Credential":"y","credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "verify credential repeated", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":"x","credential":"y"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "verify credential escaped repeat", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":"x","cr\u0065dential":"y"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "verify lone CREDENTIAL", data: req("verify", `{"signedChallenge":`+validSC+`,"CREDENTIAL":"y"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "verify signedChallenge folded (U+017F)", data: req("verify", `{"signedChallenge":`+validSC+`,"ſignedChallenge":`+validSC+`,"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "verify unknown params members repeat", data: req("verify", `{"signedChallenge":`+validSC+`,"credential":"x","ext":1,"EXT":2}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "signedChallenge nonce repeated", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","nonce":"m","timestamp":1,"agentDid":"`+testDID+`","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "signedChallenge agentDID variant", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1,"agentDid":"`+testDID+`","agentDID":"did:key:other","proofValue":"z1"},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "signedChallenge Kelvin-sign extra", data: req("verify", `{"signedChallenge":{"challenge":"c","nonce":"n","timestamp":1,"agentDid":"`+testDID+`","proofValue":"z1","k":1,"K":2},"credential":"x"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "handshake agentDid and AgentDid", data: req("handshake", `{"agentDid":"`+testDID+`","AgentDid":"did:key:other"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "handshake lone supportedMethodſ", data: req("handshake", `{"agentDid":"`+testDID+`","supportedMethodſ":["P-256"]}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
		{name: "legacy handshake with Version variant", data: req("handshake", `{"nonce":"abc","agentDid":"`+testDID+`","Version":"1.0"}`), wantErr: ErrInvalidParams, code: -32602, id: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseRequest([]byte(tt.data), tt.max, tt.opts...)
			if tt.id != "" {
				if c == nil || string(c.ID) != tt.id {
					t.Fatalf("Call = %+v, want id %s", c, tt.id)
				}
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if Code(err) != tt.code {
					t.Fatalf("Code = %d, want %d", Code(err), tt.code)
				}
				if tt.id == "" && c != nil {
					t.Fatalf("Call returned without a readable id: %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			if c.Kind != tt.kind {
				t.Fatalf("Kind = %d, want %d", c.Kind, tt.kind)
			}
			switch c.Kind {
			case KindHandshake:
				if c.Handshake == nil || c.Handshake.AgentDID != testDID || c.Verify != nil {
					t.Fatalf("Handshake = %+v", c.Handshake)
				}
			case KindVerify:
				if c.Verify == nil || c.Verify.SignedChallenge.AgentDID != testDID || c.Handshake != nil {
					t.Fatalf("Verify = %+v", c.Verify)
				}
				if _, err := c.Verify.credentialBytes(); err != nil {
					t.Fatalf("credentialBytes: %v", err)
				}
			case KindLegacyHandshake:
				if c.Handshake != nil || c.Verify != nil {
					t.Fatal("legacy params were parsed")
				}
			}
		})
	}
}

func TestParseHandshakeFields(t *testing.T) {
	c, err := ParseRequest([]byte(req("handshake", `{"agentDid":"`+testDID+`","supportedMethods":["Ed25519","secp256k1"],"version":"1.0"}`)), 0)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handshake
	if h.Version != "1.0" || strings.Join(h.SupportedMethods, ",") != "Ed25519,secp256k1" || c.Method != "handshake" {
		t.Fatalf("Handshake = %+v", h)
	}
}

func TestIsLegacyHandshake(t *testing.T) {
	tests := []struct {
		data string
		want bool
	}{
		{req("handshake", `{"nonce":"abc","audience":"did:web:srv","timestamp":1737455400,"agentDid":"`+testDID+`","clientInfo":{"name":"Claude"}}`), true},
		{req("handshake", `{"agentDid":"`+testDID+`","clientInfo":{}}`), true},
		{req("handshake", `{"agentDid":"`+testDID+`","supportedMethods":["Ed25519"],"version":"1.0"}`), false},
		{req("handshake", `{"agentDid":"`+testDID+`","nonce":"n","version":"1.0"}`), false},
		{req("handshake", `{"agentDid":"`+testDID+`"}`), false},
		{req("verify", `{"nonce":"n"}`), false},
		{req("handshake", `["n"]`), false},
		{`not json`, false},
		// Ambiguous member names are no legacy handshake.
		{req("handshake", `{"nonce":"abc","agentDid":"`+testDID+`","Version":"1.0"}`), false},
		{req("handshake", `{"nonce":"abc","nonce":"def","agentDid":"`+testDID+`"}`), false},
		{`{"jsonrpc":"2.0","id":1,"method":"handshake","method":"verify","params":{"nonce":"abc"}}`, false},
	}
	for i, tt := range tests {
		if got := IsLegacyHandshake([]byte(tt.data)); got != tt.want {
			t.Errorf("%d: IsLegacyHandshake(%s) = %v, want %v", i, tt.data, got, tt.want)
		}
	}
}

func TestCodeAndErrorResponse(t *testing.T) {
	secret := "zSECRETproofValue"
	tests := []struct {
		err  error
		code int
	}{
		{ErrParse, -32700},
		{ErrInvalidRequest, -32600},
		{ErrMethodNotFound, -32601},
		{ErrInvalidParams, -32602},
		{ErrStoreUnavailable, -32000},
		{ErrStoreFull, -32000},
		{ErrExpired, -32001},
		{ErrBadProof, -32002},
		{ErrReplay, -32003},
		{ErrNonceNotFound, -32003},
		{ErrUntrustedCredential, -32004},
		{fmt.Errorf("%w: proofValue %s", ErrBadProof, secret), -32002},
		{fmt.Errorf("%w: %w", ErrReplay, ErrNonceNotFound), -32003},
		{errors.New("boom " + secret), -32603},
		{nil, -32603},
	}
	for _, tt := range tests {
		if got := Code(tt.err); got != tt.code {
			t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.code)
		}
		resp := ErrorResponse(json.RawMessage(`"req-9"`), tt.err)
		raw, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), secret) || strings.Contains(string(raw), "challenge:") {
			t.Errorf("response echoes error text: %s", raw)
		}
		var back struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *Error          `json:"error"`
		}
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if back.JSONRPC != "2.0" || string(back.ID) != `"req-9"` || back.Error == nil || back.Error.Code != tt.code || back.Error.Message == "" || back.Result != nil {
			t.Errorf("response %s", raw)
		}
	}
	raw, _ := json.Marshal(ErrorResponse(nil, ErrParse))
	if string(raw) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` {
		t.Fatalf("parse error response %s", raw)
	}
	if !errors.Is(ErrStoreFull, ErrStoreUnavailable) || errors.Is(ErrStoreUnavailable, ErrStoreFull) {
		t.Fatal("ErrStoreFull must wrap ErrStoreUnavailable, not the reverse")
	}
}

func TestTimestamp(t *testing.T) {
	ref := time.Date(2025, 6, 15, 18, 30, 45, 0, time.UTC)
	tests := []struct {
		raw  string
		want time.Time
		ok   bool
	}{
		{`"2025-06-15T18:30:45Z"`, ref, true},
		{`"2025-06-15T20:30:45+02:00"`, ref, true},
		{`"2025-06-15T18:30:45.123Z"`, ref.Add(123 * time.Millisecond), true},
		{`1750012245`, ref, true},
		{`1750012245000`, ref, true},
		{` 1750012245000`, ref, true},
		{`"1749997845"`, time.Time{}, false},
		{`1749997845.5`, time.Time{}, false},
		{`-1`, time.Time{}, false},
		{`1e12`, time.Time{}, false},
		{`null`, time.Time{}, false},
		{`true`, time.Time{}, false},
		{`""`, time.Time{}, false},
		{`"2025-06-15 18:30:45"`, time.Time{}, false},
		{`12345678901234567`, time.Time{}, false},
	}
	for _, tt := range tests {
		var ts Timestamp
		if err := json.Unmarshal([]byte(tt.raw), &ts); err != nil {
			t.Fatalf("Unmarshal %s: %v", tt.raw, err)
		}
		got, err := ts.Time()
		if tt.ok != (err == nil) {
			t.Errorf("Time(%s) err = %v, want ok=%v", tt.raw, err, tt.ok)
			continue
		}
		if tt.ok && !got.Equal(tt.want) {
			t.Errorf("Time(%s) = %v, want %v", tt.raw, got, tt.want)
		}
		if !tt.ok && !errors.Is(err, ErrInvalidParams) {
			t.Errorf("Time(%s) err = %v, want ErrInvalidParams", tt.raw, err)
		}
	}
	for _, ts := range []Timestamp{TimestampRFC3339(ref), TimestampUnix(ref), TimestampUnixMilli(ref.Add(7 * time.Millisecond))} {
		got, err := ts.Time()
		if err != nil || got.Sub(ref) < 0 || got.Sub(ref) > 7*time.Millisecond {
			t.Errorf("%s: %v %v", ts, got, err)
		}
	}
}

func TestSignedChallengeWireForm(t *testing.T) {
	in := `{"challenge":"c","nonce":"n","timestamp":1749997845000,"agentDid":"` + testDID + `","proofValue":"zP","ext":{"b":2,"a":[1,"x"]}}`
	var sc SignedChallenge
	if err := json.Unmarshal([]byte(in), &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Challenge != "c" || sc.Nonce != "n" || sc.AgentDID != testDID || sc.ProofValue != "zP" || string(sc.Timestamp) != "1749997845000" {
		t.Fatalf("parsed %+v", sc)
	}
	msg, err := sc.SigningInput()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agentDid":"` + testDID + `","challenge":"c","ext":{"a":[1,"x"],"b":2},"nonce":"n","timestamp":1749997845000}`
	if string(msg) != want {
		t.Fatalf("signing input\n got %s\nwant %s", msg, want)
	}
	// The named members come from the fields even after a change.
	sc.Nonce = "other"
	msg, _ = sc.SigningInput()
	if !strings.Contains(string(msg), `"nonce":"other"`) {
		t.Fatalf("signing input ignores the Nonce field: %s", msg)
	}
	out, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	var back SignedChallenge
	if err := json.Unmarshal(out, &back); err != nil || back.ProofValue != "zP" || back.extra["ext"] == nil {
		t.Fatalf("round trip %s: %+v %v", out, back, err)
	}
	if err := json.Unmarshal([]byte(`{"challenge":"c"}`), &back); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("strict Unmarshal = %v", err)
	}
}

func TestSignChallenge(t *testing.T) {
	sc := SignedChallenge{Challenge: "c", Nonce: "n", AgentDID: testDID}
	for _, kt := range []didresolver.KeyType{didresolver.Ed25519, didresolver.P256, didresolver.Secp256k1} {
		a := newAgent(t, kt)
		signed, err := SignChallenge(a.priv, sc)
		if err != nil {
			t.Fatalf("%s: %v", kt, err)
		}
		if len(signed.Timestamp) == 0 || !strings.HasPrefix(signed.ProofValue, "z") {
			t.Fatalf("%s: %+v", kt, signed)
		}
		sig, err := base58.Decode(signed.ProofValue[1:])
		if err != nil || len(sig) != 64 {
			t.Fatalf("%s: proofValue not 64 bytes base58btc", kt)
		}
		msg, _ := signed.SigningInput()
		pub, _ := didresolver.PublicKeyOf(a.priv)
		if !verifySignature(pub, msg, sig) {
			t.Fatalf("%s: signature does not verify", kt)
		}
		if verifySignature(pub, append(msg, ' '), sig) {
			t.Fatalf("%s: signature verifies other bytes", kt)
		}
		other := newAgent(t, kt)
		otherPub, _ := didresolver.PublicKeyOf(other.priv)
		if verifySignature(otherPub, msg, sig) {
			t.Fatalf("%s: signature verifies under another key", kt)
		}
		if keyMethod(pub) == "" {
			t.Fatalf("%s: keyMethod empty", kt)
		}
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for _, k := range []any{p384, "key", nil} {
		if _, err := SignChallenge(k, sc); err == nil {
			t.Errorf("SignChallenge(%T) succeeded", k)
		}
	}
	if keyMethod(&p384.PublicKey) != "" {
		t.Error("P-384 accepted")
	}
}

func TestDecodeProofValue(t *testing.T) {
	sig := make([]byte, 64)
	for i := range sig {
		sig[i] = byte(i)
	}
	b64 := base64.RawURLEncoding.EncodeToString(sig)
	tests := []struct {
		pv   string
		want int
	}{
		{"z" + base58.Encode(sig), 1},
		{"u" + b64, 1},
		{b64, 1},
		{base64.URLEncoding.EncodeToString(sig), 1},
		{"z" + base58.Encode(sig[:32]), 0},
		{"!!", 0},
		{"", 0},
	}
	for _, tt := range tests {
		got := decodeProofValue(tt.pv)
		if len(got) != tt.want {
			t.Errorf("decodeProofValue(%q) = %d candidates, want %d", tt.pv, len(got), tt.want)
		}
		for _, g := range got {
			if string(g) != string(sig) {
				t.Errorf("decodeProofValue(%q) wrong bytes", tt.pv)
			}
		}
	}
}

// A full store (Redis out of memory, a memory store at its bound) is
// answered "Challenge store full", not "unavailable": the operator's fix
// (raise maxmemory or max_entries) is not an outage's.
func TestErrorResponseStoreFull(t *testing.T) {
	for err, want := range map[error]string{
		redisWriteError(redisReply("OOM command not allowed when used memory > 'maxmemory'.")): "Challenge store full",
		ErrStoreFull: "Challenge store full",
		fmt.Errorf("%w: dial tcp: connection refused", ErrStoreUnavailable): "Challenge store unavailable",
	} {
		resp := ErrorResponse(nil, err)
		if resp.Error == nil || resp.Error.Code != CodeStoreUnavailable || resp.Error.Message != want {
			t.Errorf("%v: %+v, want -32000 %q", err, resp.Error, want)
		}
	}
}

// redisReply is an error reply as go-redis reports one.
type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}
