package mcpiverify

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
)

// FuzzVerifyToken feeds arbitrary header values to Verify. It must never
// panic, every error must wrap one of the package's sentinels without
// echoing the input, and anything accepted must say exactly what one of the
// edge-signed seeds says (no forgery, no claim confusion).
func FuzzVerifyToken(f *testing.F) {
	c := newClock(t0)
	e := newEdge(f, c, ed25519Key(f))
	edTok := e.sign(f, audience)
	edPriv := e.signer.KeySet().Current().Signer
	edKid := e.kid()
	must(f, e.signer.KeySet().Rotate(t0, p256Key(f)))
	esTok := e.sign(f, audience)
	c.set(t0.Add(time.Second))
	v := e.verifier(f)

	ctx := context.Background()
	accepted := map[string]*Identity{}
	for _, tok := range []string{edTok, esTok} {
		id, err := v.Verify(ctx, tok)
		if err != nil {
			f.Fatalf("seed rejected: %v", err)
		}
		accepted[id.TokenID] = id
	}

	hdr := map[string]any{"kid": edKid, "typ": Type}
	parts := strings.Split(edTok, ".")
	for _, seed := range []string{
		edTok,
		esTok,
		parts[0] + "." + parts[1] + ".",
		parts[0] + ".." + parts[2],
		"." + parts[1] + "." + parts[2],
		b64([]byte(`{"alg":"none","typ":"mcpi-delegation+jwt","kid":"`+edKid+`"}`)) + "." + parts[1] + ".",
		mint(f, jwa.HS256, []byte("secret"), hdr, baseClaims()),
		mint(f, jwa.EdDSA, edPriv, with(hdr, "crit", []string{"b64"}), baseClaims()),
		mint(f, jwa.EdDSA, edPriv, hdr, with(baseClaims(), "aud", []any{audience, 7})),
		mint(f, jwa.EdDSA, edPriv, hdr, with(baseClaims(), "exp", "soon")),
		mint(f, jwa.EdDSA, edPriv, hdr, with(baseClaims(), "iat", 1e300)),
		`{"payload":"e30","signatures":[]}`,
		"sha256:" + strings.Repeat("0", 64),
		"",
		"..",
		"a.b.c",
		strings.Repeat("A", 20000),
	} {
		f.Add(seed)
	}

	f.Fuzz(func(t *testing.T, tok string) {
		id, err := v.Verify(ctx, tok)
		if err != nil {
			if id != nil {
				t.Fatal("identity returned with an error")
			}
			if Reason(err) == "invalid" {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			if len(tok) >= 12 && strings.Contains(err.Error(), tok) {
				t.Fatalf("error echoes the token: %v", err)
			}
			return
		}
		want, ok := accepted[id.TokenID]
		if !ok || !reflect.DeepEqual(id, want) {
			t.Fatalf("accepted a token the edge did not sign: %+v", id)
		}
	})
}
