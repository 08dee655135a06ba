package kyaos

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

const validProof = `{"prf":"org.kya-os/proof.v1","alg":"EdDSA","did":"did:key:z6Mk","kid":"did:key:z6Mk#z6Mk","audience":"did:web:s","nonce":"abc_-1","created":10,"expires":20,"requestHash":"sha-256=:T8jgo0TvEQ6oN092KUuE35oSWKt/19cUxydyYbD2qis=:","jws":"eyJ..c2ln"}`

// TestParseProofMalformed: every departure from the strict schema is
// malformed_proof at the schema step.
func TestParseProofMalformed(t *testing.T) {
	if _, err := ParseProof([]byte(validProof)); err != nil {
		t.Fatalf("valid proof refused: %v", err)
	}
	edit := func(old, new string) string {
		if !strings.Contains(validProof, old) {
			t.Fatalf("no %q", old)
		}
		return strings.Replace(validProof, old, new, 1)
	}
	cases := map[string]string{
		"not json":             `{"prf":`,
		"array":                `[1]`,
		"null":                 `null`,
		"unknown member":       edit(`"jws"`, `"delegationRef":"x","jws"`),
		"repeated member":      edit(`"jws"`, `"alg":"EdDSA","jws"`),
		"case-folded repeat":   edit(`"jws"`, `"ALG":"EdDSA","jws"`),
		"kelvin-folded name":   edit(`"kid"`, `"\u212aid"`),
		"case variant only":    edit(`"nonce"`, `"Nonce"`),
		"missing jws":          edit(`,"jws":"eyJ..c2ln"`, ``),
		"unknown prf":          edit(`org.kya-os/proof.v1`, `org.kya-os/proof.v2`),
		"alg none":             edit(`"EdDSA"`, `"none"`),
		"alg HS256":            edit(`"EdDSA"`, `"HS256"`),
		"alg ES256K":           edit(`"EdDSA"`, `"ES256K"`),
		"did:jwk":              edit(`"did":"did:key:z6Mk"`, `"did":"did:jwk:abc"`),
		"kid without fragment": edit(`"kid":"did:key:z6Mk#z6Mk"`, `"kid":"did:key:z6Mk"`),
		"nonce bad alphabet":   edit(`abc_-1`, `abc+/=`),
		"nonce empty":          edit(`"abc_-1"`, `""`),
		"created negative":     edit(`"created":10`, `"created":-1`),
		"created fraction":     edit(`"created":10`, `"created":10.5`),
		"created exponent":     edit(`"created":10`, `"created":1e1`),
		"created string":       edit(`"created":10`, `"created":"10"`),
		"created too large":    edit(`"created":10`, `"created":9007199254740992`),
		"created leading zero": edit(`"created":10`, `"created":010`),
		"audience null":        edit(`"did:web:s"`, `null`),
		"audience empty":       edit(`"did:web:s"`, `""`),
		"hash hex form":        edit(`sha-256=:T8jgo0TvEQ6oN092KUuE35oSWKt/19cUxydyYbD2qis=:`, `sha256:00`),
		"jws with payload":     edit(`eyJ..c2ln`, `eyJ.e30.c2ln`),
		"jws two parts":        edit(`eyJ..c2ln`, `eyJ.c2ln`),
		"cnf not object":       edit(`"jws"`, `"cnf":"x","jws"`),
		"cnf extra member":     edit(`"jws"`, `"cnf":{"jkt":"a","x":1},"jws"`),
		"cnf empty":            edit(`"jws"`, `"cnf":{},"jws"`),
		"cnf null":             edit(`"jws"`, `"cnf":null,"jws"`),
		"httpSig not b64url":   edit(`"jws"`, `"httpSig":"a+b","jws"`),
		"too large":            edit(`abc_-1`, strings.Repeat("a", 9000)),
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseProof([]byte(raw))
			if ReasonOf(err) != MalformedProof || StepOf(err) != StepSchema {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// FuzzParseProof: the parser never panics, and what it accepts is a proof
// that survives its own wire form unchanged.
func FuzzParseProof(f *testing.F) {
	f.Add([]byte(validProof))
	f.Add([]byte(`{"cnf":{"jkt":"x"}}`))
	f.Add([]byte(`{"prf":"\u006frg"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseProof(raw)
		if err != nil {
			return
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseProof(again)
		if err != nil || *q != *p {
			t.Fatalf("round trip: %v %+v %+v", err, p, q)
		}
	})
}

// FuzzFindProof: reading a proof out of any body never panics.
func FuzzFindProof(f *testing.F) {
	f.Add([]byte(`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":{}}}}`))
	f.Add([]byte(`{"method":"m","params":[1]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _ = FindProof(body)
		_, _ = RequestHash(body)
	})
}

type agent struct {
	priv any
	did  string
	kid  string
}

func newAgent(t testing.TB, kt didresolver.KeyType) agent {
	t.Helper()
	priv, err := didresolver.GenerateKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := didresolver.PublicKeyOf(priv)
	did, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return agent{priv, did, kid}
}

const aud = "did:web:edge.example"
const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":42.10,"n":1e2}}}`

// TestSignVerifyRoundTrip: what SignRequest mints, Verify accepts, for
// both algorithms, and the body outside params._meta is byte for byte the
// one given.
func TestSignVerifyRoundTrip(t *testing.T) {
	for _, kt := range []didresolver.KeyType{didresolver.Ed25519, didresolver.P256} {
		t.Run(string(kt), func(t *testing.T) {
			a := newAgent(t, kt)
			now := time.Unix(1_800_000_000, 0)
			body, p, err := SignRequest([]byte(call), a.priv, SignOptions{KID: a.kid, Audience: aud, Now: now, Cnf: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(body), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":42.10,"n":1e2},"_meta":{"org.kya-os/request-proof":{`) {
				t.Fatalf("body changed outside _meta: %s", body)
			}
			if p.Expires-p.Created != 60 || len(p.Nonce) < 22 {
				t.Fatalf("proof %+v", p)
			}
			v := NewVerifier(didresolver.New(), &memNonces{}, WithClock(func() time.Time { return now }))
			res, err := v.Verify(context.Background(), Request{Body: body, Audience: aud})
			if err != nil {
				t.Fatal(err)
			}
			if res.Proof.DID != a.did || !res.UnfusedCnf {
				t.Fatalf("result %+v", res)
			}
			// A token bound to the same key fuses; to another refuses.
			v2 := NewVerifier(didresolver.New(), &memNonces{}, WithClock(func() time.Time { return now }))
			if res, err := v2.Verify(context.Background(), Request{Body: body, Audience: aud, TokenJKT: p.CnfJKT}); err != nil || !res.Fused {
				t.Fatalf("fused: %v", err)
			}
			v3 := NewVerifier(didresolver.New(), &memNonces{}, WithClock(func() time.Time { return now }))
			if _, err := v3.Verify(context.Background(), Request{Body: body, Audience: aud, TokenJKT: "other"}); ReasonOf(err) != CnfTokenMismatch {
				t.Fatalf("token mismatch: %v", err)
			}
		})
	}
}

// TestVerifyRefusals: one row per rule, each minted validly except for
// the one thing it breaks.
func TestVerifyRefusals(t *testing.T) {
	a := newAgent(t, didresolver.Ed25519)
	other := newAgent(t, didresolver.Ed25519)
	now := time.Unix(1_800_000_000, 0)
	sign := func(o SignOptions, body string, priv any) []byte {
		if o.KID == "" {
			o.KID = a.kid
		}
		if o.Audience == "" {
			o.Audience = aud
		}
		if o.Now.IsZero() {
			o.Now = now
		}
		b, _, err := SignRequest([]byte(body), priv, o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	valid := sign(SignOptions{}, call, a.priv)
	// The signature with a spare bit of its last character set: the same
	// bytes to a lenient decoder, another jws text.
	sig := valid[strings.Index(string(valid), `"jws":"`)+7:]
	sig = sig[:strings.IndexByte(string(sig), '"')]
	last := sig[len(sig)-1]
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	spareBit := string(sig[:len(sig)-1]) + string(alphabet[strings.IndexByte(alphabet, last)|1])
	bigInt := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"n":9007199254740992}}}`
	signedBig := sign(SignOptions{}, bigInt, a.priv)
	// rewrite edits the proof's JSON inside the body.
	rewrite := func(b []byte, old, new string) []byte {
		if !strings.Contains(string(b), old) {
			t.Fatalf("no %q in %s", old, b)
		}
		return []byte(strings.Replace(string(b), old, new, 1))
	}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cases := []struct {
		name   string
		body   []byte
		tok    string
		reason Reason
		sub    string // Request.Subject
	}{
		{"no proof", []byte(call), "", ProofMissing, ""},
		{"arguments changed", rewrite(valid, `42.10`, `42.11`), "", RequestHashMismatch, ""},
		{"name changed", rewrite(valid, `"pay"`, `"pax"`), "", RequestHashMismatch, ""},
		{"2^53 signed", signedBig, "", "", ""},
		{"signature spare bits set", rewrite(valid, string(sig), spareBit), "", InvalidSignature, ""},
		// The same double under JCS, another integer to an exact reader.
		{"2^53 swapped for 2^53+1", rewrite(signedBig, `9007199254740992`, `9007199254740993`), "", RequestHashAmbiguousNumber, ""},
		{"20 digits", sign(SignOptions{}, strings.Replace(bigInt, `9007199254740992`, `12345678901234567891`, 1), a.priv), "", RequestHashAmbiguousNumber, ""},
		{"_meta not covered", sign(SignOptions{}, strings.Replace(bigInt, `"name":"pay"`, `"_meta":{"t":12345678901234567891},"name":"pay"`, 1), a.priv), "", "", ""},
		{"wrong audience", sign(SignOptions{Audience: "did:web:evil"}, call, a.priv), "", AudienceMismatch, ""},
		{"expired", sign(SignOptions{Now: now.Add(-2 * time.Minute)}, call, a.priv), "", Expired, ""},
		{"in the future", sign(SignOptions{Now: now.Add(time.Minute)}, call, a.priv), "", CreatedInFuture, ""},
		{"within skew", sign(SignOptions{Now: now.Add(-64 * time.Second)}, call, a.priv), "", "", ""},
		{"window over 60s", rewrite(valid, `"expires":1800000060`, `"expires":1800000061`), "", TTLTooLong, ""},
		{"empty window", rewrite(valid, `"expires":1800000060`, `"expires":1800000000`), "", InvalidWindow, ""},
		{"kid of another did", sign(SignOptions{KID: other.kid}, call, a.priv), "", InvalidSignature, ""},
		{"kid/did forgery", rewrite(valid, `"did":"`+a.did, `"did":"`+other.did), "", KidDIDMismatch, ""},
		{"alg swapped", rewrite(valid, `"alg":"EdDSA"`, `"alg":"ES256"`), "", InvalidSignature, ""},
		{"p256 key named as Ed25519 did", sign(SignOptions{}, call, p256), "", AlgKeyMismatch, ""},
		{"unknown did:key", rewrite(valid, a.kid, a.did+"#other"), "", KeyUnresolvable, ""},
		{"token but no cnf", valid, "jkt", CnfRequiredByToken, ""},
		{"malformed body", []byte(`{"method":"m","method":"m"}`), "", MalformedProof, ""},
		{"another agent's proof", sign(SignOptions{KID: other.kid}, call, other.priv), "", HolderMismatch, a.did},
		{"the subject's proof", valid, "", "", a.did},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := Request{Body: c.body, Audience: aud, TokenJKT: c.tok, Subject: c.sub}
			v := NewVerifier(didresolver.New(), &memNonces{}, WithClock(func() time.Time { return now }))
			_, err := v.Verify(context.Background(), req)
			if ReasonOf(err) != c.reason {
				t.Fatalf("got %v, want %q", err, c.reason)
			}
			// Check, the verdict alone, gives the same one (a fresh nonce
			// store: Verify spent the nonce of an accepted proof).
			v = NewVerifier(didresolver.New(), &memNonces{}, WithClock(func() time.Time { return now }))
			if err := v.Check(context.Background(), req); ReasonOf(err) != c.reason {
				t.Fatalf("Check: got %v, want %q", err, c.reason)
			}
			if c.reason == "" {
				if err := v.Check(context.Background(), req); ReasonOf(err) != NonceReplayed {
					t.Fatalf("Check replayed: got %v, want %q", err, NonceReplayed)
				}
			}
		})
	}
}

// TestVerifyKeyRelationship: a key the agent's document lists only under
// assertionMethod does not sign request proofs (docs/protocol/kyaos.md#key-relationship).
func TestVerifyKeyRelationship(t *testing.T) {
	priv, _ := didresolver.GenerateKey(didresolver.Ed25519)
	pub := priv.(ed25519.PrivateKey).Public()
	jwk, _ := didresolver.PublicJWK(pub)
	did := "did:web:agent.example"
	jwk["kid"] = did + "#k1"
	now := time.Unix(1_800_000_000, 0)
	body, _, err := SignRequest([]byte(call), priv, SignOptions{KID: did + "#k1", Audience: aud, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]Reason{"authentication": "", "assertionMethod": KidNotInDIDDocument} {
		res := docResolver{docs: map[string]*didresolver.Document{did: jwkDocument(t, did, rel, jwk)}}
		v := NewVerifier(res, &memNonces{}, WithClock(func() time.Time { return now }))
		if _, err := v.Verify(context.Background(), Request{Body: body, Audience: aud}); ReasonOf(err) != want {
			t.Fatalf("%s: got %v want %q", rel, err, want)
		}
	}
}

// TestForgedProofDoesNotBurnNonce: a proof with a bad signature leaves its
// nonce unspent, so the genuine proof still passes (docs/protocol/kyaos.md#order-of-checks).
func TestForgedProofDoesNotBurnNonce(t *testing.T) {
	a := newAgent(t, didresolver.Ed25519)
	now := time.Unix(1_800_000_000, 0)
	body, p, err := SignRequest([]byte(call), a.priv, SignOptions{KID: a.kid, Audience: aud, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	sig := p.JWS[strings.LastIndex(p.JWS, ".")+1:]
	forged := strings.Replace(string(body), sig, strings.Repeat("A", len(sig)-1)+"A", 1)
	store := &memNonces{}
	v := NewVerifier(didresolver.New(), store, WithClock(func() time.Time { return now }))
	if _, err := v.Verify(context.Background(), Request{Body: []byte(forged), Audience: aud}); ReasonOf(err) != InvalidSignature {
		t.Fatalf("forged: %v", err)
	}
	if _, err := v.Verify(context.Background(), Request{Body: body, Audience: aud}); err != nil {
		t.Fatalf("genuine after forgery: %v", err)
	}
	if got := store.seen[a.did+"\x00"+p.Nonce]; got != 71*time.Second {
		t.Fatalf("nonce ttl %v, want 71s", got)
	}
}

// TestSmallOrderKeyRefused: an Ed25519 identity-point key is refused
// before any signature is checked.
func TestSmallOrderKeyRefused(t *testing.T) {
	small := make(ed25519.PublicKey, 32)
	small[0] = 1 // the identity point
	if keyFits(AlgEdDSA, small) {
		t.Fatal("identity point accepted")
	}
	good := newAgent(t, didresolver.Ed25519).priv.(ed25519.PrivateKey).Public()
	if !keyFits(AlgEdDSA, good) {
		t.Fatal("real key refused")
	}
}
