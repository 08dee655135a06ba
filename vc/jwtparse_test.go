package vc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// errNotCompact is the error of a token with a byte that no compact JWS
// holds.
var errNotCompact = fail(ErrMalformed, "not a compact JWS").Error()

// parseJWSRef is parseJWS as it was before it left the payload's bytes to
// its decoder: every byte looked at first.
func parseJWSRef(raw []byte) error {
	if !jwsChars(raw) {
		return fail(ErrMalformed, "not a compact JWS")
	}
	_, _, err := parseJWS(raw)
	return err
}

// jwsDefects are tokens that parseJWS refuses for other reasons, or
// accepts: a byte outside the alphabet must be refused first whatever else
// is wrong, as when every byte was looked at before anything else.
func jwsDefects(t testing.TB) [][]byte {
	fx := newFixture(t)
	good := mint(t, fx.ed.priv, header("EdDSA", fx.ed.kid), fx.vc11Claims(fx.ed))
	h, rest, _ := bytes.Cut(good, []byte{'.'})
	pl, sig, _ := bytes.Cut(rest, []byte{'.'})
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, []byte{'.'}) }
	return [][]byte{
		good,
		join(append(bytes.Clone(h), 'B'), pl, sig),                                      // header: a bad length
		join(h[:len(h)-1], pl, sig),                                                     // header: trailing bits
		join([]byte(b64([]byte(`["x"]`))), pl, sig),                                     // header not an object
		join([]byte(b64([]byte(`{"alg":"EdDSA","crit":["b64"]}`))), pl, sig),            // crit
		join(h, append(bytes.Clone(pl), 'B'), sig),                                      // payload: a bad length
		join(h, []byte(b64([]byte(`{"sub":"alice"}`))), sig),                            // not a credential
		join(h, []byte(b64([]byte(`{"vc":1}`))), sig),                                   // a broken credential
		join(h, pl, sig[:len(sig)-3]),                                                   // signature too short
		join(h, pl, sig, sig),                                                           // four segments
		join(h, pl),                                                                     // two
		join(h, nil, sig),                                                               // empty payload
		join(nil, pl, sig),                                                              // empty header
		join(h, []byte(b64([]byte(`{"iss":"a","vc":{"type":"x"},"vc":{}}`))), sig),      // repeated member
		join([]byte(b64([]byte(`{"alg":"EdDSA","typ":"vp+jwt"}`))), pl, []byte("c2ln")), // a presentation's typ
	}
}

// A byte no compact JWS holds (a line break, which the base64 decoder
// would skip, padding, the standard alphabet's letters, space, control
// and non-ASCII bytes) is refused as not a compact JWS wherever it is, in
// the header, the payload or the signature, before any other defect.
func TestParseJWSRefusesForeignBytes(t *testing.T) {
	for i, tok := range jwsDefects(t) {
		for _, c := range []byte("\n\r=+/ \t\x00\xff{\"") {
			for _, at := range []int{0, 1, len(tok) / 4, len(tok) / 2, len(tok) - 90, len(tok) - 2, len(tok) - 1, len(tok)} {
				bad := append(append(bytes.Clone(tok[:at]), c), tok[at:]...)
				_, _, err := parseJWS(bad)
				if err == nil || err.Error() != errNotCompact {
					t.Errorf("token %d with %q at %d: %v, want %s", i, c, at, err, errNotCompact)
				}
			}
		}
		if got, want := errString(parseJWSErr(tok)), errString(parseJWSRef(tok)); got != want {
			t.Errorf("token %d: %s, want %s", i, got, want)
		}
	}
}

func parseJWSErr(raw []byte) error {
	_, _, err := parseJWS(raw)
	return err
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// FuzzParseJWSBytes: parseJWS gives the error it gave when it looked at
// every byte before anything else, on any input.
func FuzzParseJWSBytes(f *testing.F) {
	for _, tok := range jwsDefects(f) {
		f.Add(tok)
	}
	f.Add([]byte("eyJhbGciOiJFZERTQSJ9.e30\n."))
	f.Add([]byte("eyJhbGciOiJFZERTQSJ9.e30=.x"))
	f.Add([]byte(".."))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := errString(parseJWSErr(raw)), errString(parseJWSRef(raw)); got != want {
			t.Errorf("parseJWS(%q) = %s, want %s", raw, got, want)
		}
	})
}

// The decoded strings share the decoded claims (parseJWS makes no second
// copy of them), so the raw members that share them too must be capped:
// appending to one must not write over the strings after it.
func TestParseJWSRawMembersCapped(t *testing.T) {
	fx := newFixture(t)
	claims := fx.vc11Claims(fx.ed)
	vc := claims["vc"].(map[string]any)
	// credentialStatus comes before credentialSubject and id in the
	// encoding (json.Marshal sorts the keys of a map).
	vc["credentialStatus"] = map[string]any{"type": "StatusList2021Entry", "statusListIndex": "7"}
	tok := mint(t, fx.ed.priv, header("EdDSA", fx.ed.kid), claims)
	p, _, err := parseJWS(tok)
	if err != nil {
		t.Fatal(err)
	}
	before := *p
	for _, raw := range [][]byte{p.status, p.subject.Type, p.subject.StatusPurpose, p.subject.EncodedList} {
		_ = append(raw, bytes.Repeat([]byte{'X'}, 200)...)
	}
	if p.d.AgentDID != fx.agent.did || p.d.ID != before.d.ID || p.d.Issuer != fx.ed.did ||
		p.d.DelegationID != "3f0c0000-0000-4000-8000-000000000001" || p.kid != fx.ed.kid {
		t.Errorf("appending to a raw member changed the decoded strings: %+v", p.d)
	}
	if len(p.status) == 0 {
		t.Fatal("no credentialStatus decoded: the test tests nothing")
	}
}

// A verified credential's room is reused by the next parse (releaseRoom):
// the Delegations returned before must not change, whatever is verified
// after them, one after another or concurrently.
func TestVerifyRoomReuse(t *testing.T) {
	fx := newFixture(t)
	v := fx.verifier(WithoutStatusCheck())
	tokens := make([][]byte, 16)
	for i := range tokens {
		claims := fx.vc11Claims(fx.ed)
		id := fmt.Sprintf("urn:uuid:3f0c0000-0000-4000-8000-%012d", i)
		claims["jti"] = id
		vc := claims["vc"].(map[string]any)
		vc["id"] = id
		deleg := vc["credentialSubject"].(map[string]any)["delegation"].(map[string]any)
		scopes := []any{fmt.Sprintf("tool%d:read", i), fmt.Sprintf("tool%d:write", i)}
		deleg["scopes"] = scopes
		deleg["constraints"].(map[string]any)["scopes"] = scopes
		deleg["id"] = fmt.Sprintf("d-%d", i)
		tokens[i] = mint(t, fx.ed.priv, header("EdDSA", fx.ed.kid), claims)
	}
	ctx := context.Background()
	verify := func(i int) (*Delegation, string) {
		d, err := v.Verify(ctx, tokens[i], ForAudience(serverDID))
		if err != nil {
			t.Errorf("credential %d: %v", i, err)
			return nil, ""
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), fmt.Sprintf(`"tool%d:read"`, i)) || d.DelegationID != fmt.Sprintf("d-%d", i) {
			t.Errorf("credential %d verified as %s", i, b)
		}
		return d, string(b)
	}
	kept := map[*Delegation]string{}
	for i := range tokens {
		d, s := verify(i)
		kept[d] = s
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range tokens {
				verify(i)
			}
		})
	}
	wg.Wait()
	for d, want := range kept {
		if got, _ := json.Marshal(d); string(got) != want {
			t.Errorf("a Delegation changed after later verifications:\n%s\nwas\n%s", got, want)
		}
	}
}
