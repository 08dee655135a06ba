package proof

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// TestProofKeyPrefix: mayHoldProof looks only for proofKeyPrefix + "/",
// which must begin both names kyaos reads a proof under.
func TestProofKeyPrefix(t *testing.T) {
	for _, k := range []string{kyaos.ProofKey, kyaos.LegacyProofKey} {
		if !strings.HasPrefix(k, proofKeyPrefix+"/") {
			t.Errorf("%q does not begin %q: mayHoldProof would skip its proofs", k, proofKeyPrefix+"/")
		}
	}
}

// mayHoldCases are bodies with a proof under every spelling a reader might
// accept (escapes, letter case, Unicode folds, the legacy name), and
// bodies that cannot hold one.
var mayHoldCases = []struct {
	body string
	may  bool
}{
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, false},
	{`{"method":"x","params":{"_meta":{"org.kya-os-request-proof":{}}}}`, false},
	{`{"method":"x","params":{"_meta":{"org.kya-o/request-proof":{}}}}`, false},
	{`{"method":"x","params":{"_meta":{"org.kya-os/request-proof":{}}}}`, true},
	{`{"method":"x","params":{"_meta":{"org.kya-os/proof@1":{}}}}`, true},
	{`{"method":"x","params":{"_meta":{"ORG.KYA-OS/REQUEST-PROOF":{}}}}`, true},
	{`{"method":"x","params":{"_meta":{"Org.Kya-Os/Proof@1":{}}}}`, true},
	{"{\"method\":\"x\",\"params\":{\"_meta\":{\"org.\u212aya-os/request-proof\":{}}}}", true},  // Kelvin sign
	{"{\"method\":\"x\",\"params\":{\"_meta\":{\"org.kya-o\u017f/request-proof\":{}}}}", true},  // long s
	{"{\"method\":\"x\",\"params\":{\"_meta\":{\"org.kya-\u00d3s/request-proof\":{}}}}", false}, // Ó folds to no o
	{`{"method":"x","params":{"_meta":{"org.kya-os\/request-proof":{}}}}`, true},
	{`{"method":"x","params":{"_meta":{"org.kya-os\u002frequest-proof":{}}}}`, true},
	{`{"method":"x","params":{"_meta":{"\u006frg.kya-os/request-proof":{}}}}`, true},
	{`{"method":"x","params":{"text":"\n"}}`, true},                       // any escape: read
	{`{"method":"x","params":{"text":"org.kya-os/request-proof"}}`, true}, // errs towards reading
	{`org.kya-os/`, true},
	{`/`, false},
	{``, false},
}

func TestMayHoldProof(t *testing.T) {
	for _, c := range mayHoldCases {
		if got := mayHoldProof([]byte(c.body)); got != c.may {
			t.Errorf("mayHoldProof(%s) = %v, want %v", c.body, got, c.may)
		}
		checkSkip(t, []byte(c.body))
	}
}

// checkSkip fails when mayHoldProof skips a body in which kyaos finds a
// proof, or in which a reader folding member names (the strict reader
// refuses such names; a lenient one would match them) finds one.
func checkSkip(t *testing.T, body []byte) {
	t.Helper()
	if mayHoldProof(body) {
		return
	}
	if p, err := kyaos.FindProof(body); err == nil && p != nil {
		t.Fatalf("skipped %q, where kyaos finds the proof %s", body, p)
	}
	if foldedProof(body) {
		t.Fatalf("skipped %q, where a case-folding reader finds a proof", body)
	}
}

// foldedProof is a lenient reading of params._meta's proof: every member
// name compared after unescaping and case folding, at the places kyaos
// reads.
func foldedProof(body []byte) bool {
	found := false
	member := func(obj []byte, name string, then func(v []byte)) {
		jsonscan.Walk(obj, func(k, v []byte) {
			if jsonkey.Fold(string(jsonscan.Unquote(k))) == jsonkey.Fold(name) {
				then(v)
			}
		})
	}
	member(body, "params", func(params []byte) {
		member(params, "_meta", func(meta []byte) {
			member(meta, kyaos.ProofKey, func([]byte) { found = true })
			member(meta, kyaos.LegacyProofKey, func([]byte) { found = true })
		})
	})
	return found
}

func FuzzMayHoldProof(f *testing.F) {
	for _, c := range mayHoldCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkSkip(t, body) })
}

// TestAdmitReadsEverySpelling: a proof under any spelling kyaos reads is
// verified (here refused as malformed), never skipped as absent; a body
// without one is admitted under optional and refused under required, as
// before the skip.
func TestAdmitReadsEverySpelling(t *testing.T) {
	const plain = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	withProof := func(key string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"` + key + `":{"alg":"EdDSA"}}}}`
	}
	for _, c := range []struct {
		mode, body string
		status     int // 0: admitted, no proof
	}{
		{Optional, plain, 0},
		{Required, plain, http.StatusUnauthorized},
		{Optional, withProof(kyaos.ProofKey), http.StatusUnauthorized},
		{Optional, withProof(kyaos.LegacyProofKey), http.StatusUnauthorized},
		{Optional, withProof(`org.kya-os\/request-proof`), http.StatusUnauthorized},
		{Optional, withProof(`org.kya-os\u002frequest-proof`), http.StatusUnauthorized},
		{Optional, withProof(`\u006frg.kya-os/proof@1`), http.StatusUnauthorized},
	} {
		g := New(Config{RequestProof: c.mode}, nil, nil)
		msgs, batch, err := mcp.ParseStrict([]byte(c.body))
		ok, rf := g.Admit(context.Background(), Body{Raw: []byte(c.body), Msgs: msgs, Batch: batch, Err: err}, "did:web:example.com", "did:key:z6Mk", "")
		status := 0
		if rf != nil {
			status = rf.Status
		}
		if ok || status != c.status {
			t.Errorf("%s %s: proved %v, refusal %+v; want status %d", c.mode, c.body, ok, rf, c.status)
		}
		if c.body != plain && (rf == nil || rf.Reason != string(kyaos.MalformedProof)) {
			t.Errorf("%s: refusal %+v, want %s (the proof was read)", c.body, rf, kyaos.MalformedProof)
		}
	}
}
