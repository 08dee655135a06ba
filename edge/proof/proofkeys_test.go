package proof

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"unicode"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// withMeta is a tools/call whose params._meta holds meta's members.
func withMeta(meta string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{` + meta + `}}}`
}

// proofKeyCases are the shapes of a proof under a name
// that folds to a proof key without being it, or two different proofs
// under both keys, is ambiguous; one proof under one exact key (escaped or
// not), or the same proof under both, is not.
var proofKeyCases = []struct {
	name, body string
	ambiguous  bool
}{
	{"canonical", withMeta(`"org.kya-os/request-proof":{"a":1}`), false},
	{"legacy", withMeta(`"org.kya-os/proof@1":{"a":1}`), false},
	{"canonical escaped", withMeta(`"org.kya-os\/request-proof":{"a":1}`), false},
	{"legacy \\u escaped", withMeta(`"\u006frg.kya-os/proof@1":{"a":1}`), false},
	{"no proof", withMeta(`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`), false},
	{"proof-like value", withMeta(`"note":"org.kya-os/request-proof"`), false},
	{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"org.kya-os/request-proof"}}`, false},
	{"params array", `{"jsonrpc":"2.0","id":1,"method":"m","params":["org.kya-os/request-proof"]}`, false},
	{"_meta not object", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"ORG.kya-os/request-proof"}}`, false},
	{"nested deeper", withMeta(`"x":{"ORG.kya-os/request-proof":{}}`), false},
	{"upper case prefix", withMeta(`"ORG.kya-os/request-proof":{"a":1}`), true},
	{"all upper", withMeta(`"ORG.KYA-OS/REQUEST-PROOF":{"a":1}`), true},
	{"legacy variant", withMeta(`"Org.Kya-Os/Proof@1":{"a":1}`), true},
	{"Kelvin sign", withMeta("\"org.\u212aya-os/request-proof\":{\"a\":1}"), true},
	{"long s", withMeta("\"org.kya-o\u017f/request-proof\":{\"a\":1}"), true},
	{"escaped variant", withMeta(`"\u004frg.kya-os/request-proof":{"a":1}`), true},
	{"legacy variant beside canonical", withMeta(`"org.kya-os/request-proof":{"a":1},"ORG.kya-os/proof@1":{"b":2}`), true},
	{"both keys", withMeta(`"org.kya-os/request-proof":{"a":1},"org.kya-os/proof@1":{"b":2}`), true},
	{"both keys, legacy first", withMeta(`"org.kya-os/proof@1":{"b":2},"org.kya-os/request-proof":{"a":1}`), true},
	{"both keys, one proof", withMeta(`"org.kya-os/request-proof":{"a":1},"org.kya-os/proof@1":{"a":1}`), false},
	{"both keys, one proof spelled apart", withMeta(`"org.kya-os/request-proof":{"a":1},"org.kya-os/proof@1":{"a": 1}`), true},
	{"variant in a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},` + withMeta(`"ORG.kya-os/request-proof":{}`) + `]`, true},
	{"variant in a notification", `{"jsonrpc":"2.0","method":"notifications/x","params":{"_meta":{"org.kya-os/REQUEST-proof":{}}}}`, true},
}

func TestAmbiguousProof(t *testing.T) {
	for _, c := range proofKeyCases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			msgs, batch, err := mcp.ParseStrict(body)
			if err != nil {
				t.Fatalf("ParseStrict: %v (the case must be strict JSON-RPC)", err)
			}
			b := Body{Raw: body, Msgs: msgs, Batch: batch}
			for _, mode := range []string{Optional, Required} {
				if got := New(Config{RequestProof: mode}, nil, nil).AmbiguousProof(b); got != c.ambiguous {
					t.Errorf("%s: AmbiguousProof = %v, want %v", mode, got, c.ambiguous)
				}
			}
			// Off reads no proof: nothing to be ambiguous about.
			if New(Config{RequestProof: Off}, nil, nil).AmbiguousProof(b) {
				t.Error("off: AmbiguousProof = true")
			}
			if got := foldedKeys(body); got != c.ambiguous {
				t.Errorf("reference reading: %v, want %v", got, c.ambiguous)
			}
		})
	}
}

// TestAmbiguousProofUnreadBody: a body ParseStrict refused is left to the
// refusal (or the no-proof reading) it already has.
func TestAmbiguousProofUnreadBody(t *testing.T) {
	body := []byte(withMeta(`"ORG.kya-os/request-proof":{}`))
	g := New(Config{RequestProof: Optional}, nil, nil)
	if g.AmbiguousProof(Body{Raw: body, Err: mcp.ErrAmbiguous}) {
		t.Error("AmbiguousProof = true on a body with Err set")
	}
	var nilGate *Gate
	if nilGate.AmbiguousProof(Body{Raw: body}) {
		t.Error("nil gate: AmbiguousProof = true")
	}
}

// foldedKeys is a reference for AmbiguousProof on a strict body: the names
// of every message's params._meta, folded one by one, compared with the
// proof keys' folds.
func foldedKeys(body []byte) bool {
	msgs, _, err := mcp.ParseStrict(body)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		meta := jsonscan.Member(m.Params, "_meta")
		if !strings.HasPrefix(string(meta), "{") {
			continue
		}
		var values []string
		ambiguous := false
		jsonscan.Walk(meta, func(k, v []byte) {
			name := string(jsonscan.Unquote(k))
			for _, key := range []string{kyaos.ProofKey, kyaos.LegacyProofKey} {
				switch {
				case name == key:
					values = append(values, string(v))
				case jsonkey.Fold(name) == jsonkey.Fold(key):
					ambiguous = true
				}
			}
		})
		if ambiguous || (len(values) > 1 && values[0] != values[1]) {
			return true
		}
	}
	return false
}

func FuzzAmbiguousProof(f *testing.F) {
	for _, c := range proofKeyCases {
		f.Add([]byte(c.body))
	}
	g := New(Config{RequestProof: Optional}, nil, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, batch, err := mcp.ParseStrict(body)
		if err != nil {
			return
		}
		if got, want := g.AmbiguousProof(Body{Raw: body, Msgs: msgs, Batch: batch}), foldedKeys(body); got != want {
			t.Fatalf("AmbiguousProof(%q) = %v, reference %v", body, got, want)
		}
	})
}

// mayHoldMetaCases: every spelling of _meta a reader might take for it
// must be read (ParseStrict then refuses the variants), including the
// "_Meta".
var mayHoldMetaCases = []struct {
	body string
	may  bool
}{
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","x_met":1}}`, false},
	{`{"method":"x","params":{"text":"\n"}}`, false}, // no \u: no letter can be escaped
	{`{"method":"x","params":{"_meta":{}}}`, true},
	{`{"method":"x","params":{"_Meta":{}}}`, true},
	{`{"method":"x","params":{"_META":{}}}`, true},
	{`{"method":"x","params":{"_mEtA":{}}}`, true},
	{`{"method":"x","params":{"\u005fmeta":{}}}`, true},
	{`{"method":"x","params":{"_\u006deta":{}}}`, true},
	{`_meta`, true},
	{`_met`, false},
	{`_`, false},
	{``, false},
}

func TestMayHoldMeta(t *testing.T) {
	for _, c := range mayHoldMetaCases {
		if got := mayHoldMeta([]byte(c.body)); got != c.may {
			t.Errorf("mayHoldMeta(%s) = %v, want %v", c.body, got, c.may)
		}
		checkMetaSkip(t, []byte(c.body))
	}
}

// TestMetaFoldsASCII: no rune outside ASCII folds to a character of
// "_meta" (as jsonkey folds), which is what lets mayHoldMeta compare
// bytes.
func TestMetaFoldsASCII(t *testing.T) {
	for r := rune(utf8Self); r <= unicode.MaxRune; r++ {
		if strings.Contains("_meta", jsonkey.Fold(string(r))) && jsonkey.Fold(string(r)) != "" {
			t.Errorf("U+%04X folds to %q, a character of _meta", r, jsonkey.Fold(string(r)))
		}
	}
}

const utf8Self = 0x80

// checkMetaSkip fails when mayHoldMeta skips a body in which some object,
// at any depth, has a member whose name folds to _meta.
func checkMetaSkip(t *testing.T, body []byte) {
	t.Helper()
	if !mayHoldMeta(body) && foldedMeta(body) {
		t.Fatalf("skipped %q, which has a member folding to _meta", body)
	}
}

// foldedMeta reports whether any object in the JSON value body has a
// member whose unescaped name folds to _meta.
func foldedMeta(body []byte) bool {
	found := false
	var visit func(v []byte)
	visit = func(v []byte) {
		c := jsonscan.NewCursor(v)
		switch c.Kind() {
		case '{':
			jsonscan.Walk(v, func(k, val []byte) {
				if jsonkey.Fold(string(jsonscan.Unquote(k))) == "_meta" {
					found = true
				}
				visit(val)
			})
		case '[':
			c.Array()
			for c.NextElement() {
				s, e := c.Skip()
				visit(v[s:e])
			}
		}
	}
	if jsonscan.Valid(body) {
		visit(body)
	}
	return found
}

func FuzzMayHoldMeta(f *testing.F) {
	for _, c := range mayHoldMetaCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkMetaSkip(t, body) })
}

// BenchmarkAmbiguousProof is the cost the check adds to a proof-bearing
// request (the plain 2026 request skips it on mayHoldProof).
func BenchmarkAmbiguousProof(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	body, _, err := kyaos.SignRequest([]byte(withMeta(`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`)), priv,
		kyaos.SignOptions{KID: "did:key:z6Mk#z6Mk", Audience: "did:web:example.com"})
	if err != nil {
		b.Fatal(err)
	}
	msgs, batch, err := mcp.ParseStrict(body)
	if err != nil {
		b.Fatal(err)
	}
	g := New(Config{RequestProof: Optional}, nil, nil)
	pb := Body{Raw: body, Msgs: msgs, Batch: batch}
	b.ReportAllocs()
	for b.Loop() {
		if g.AmbiguousProof(pb) {
			b.Fatal("ambiguous")
		}
	}
}
