package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// Valid must accept exactly what json.Valid accepts, nesting included
// (objects and arrays alternating past the first 64 levels, closed right
// and wrong).
func TestValidAgreesWithJSONValid(t *testing.T) {
	in := []string{
		``, ` `, `1`, `-0`, `-`, `01`, `1.`, `.1`, `1e5`, `1E+5`, `1e-`, `"a"`, `"\ud800"`, `"\u00zz"`,
		`"\q"`, "\"\x7f\"", "\"\x1f\"", `true`, `tru`, `nulll`, `[]`, `[1,]`, `[,]`, `{}`, `{"a":1,}`,
		`{"a"}`, `{"a":1 "b":2}`, `{"a":[1,{"b":null}],"c":"}"}`, `[1]]`, `{"a":1}}`, `{"a":1]`, `[1}`,
		"{\"a\":\t1\n}\r\n", `{"a":1}` + "\x00", `{1:2}`, `{"a":01}`,
	}
	for _, n := range []int{63, 64, 65, 130, 200} {
		var open, closeRight, closeWrong strings.Builder
		for i := range n {
			if i%2 == 0 {
				open.WriteString(`{"k":`)
			} else {
				open.WriteString(`[`)
			}
		}
		for i := n - 1; i >= 0; i-- {
			if i%2 == 0 {
				closeRight.WriteString(`}`)
				closeWrong.WriteString(`]`)
			} else {
				closeRight.WriteString(`]`)
				closeWrong.WriteString(`}`)
			}
		}
		in = append(in, open.String()+"1"+closeRight.String(), open.String()+"1"+closeWrong.String(),
			open.String()+"1"+closeRight.String()[:n-1])
	}
	for _, s := range in {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"c":"}"}`, `[1,]`, `"\u00zz"`, `-0.5e+3`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := Valid(in), json.Valid(in); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", in, got, want)
		}
	})
}

// Walk reports the members of a top-level object, keys quoted, and only
// those.
func TestWalkMembers(t *testing.T) {
	var got []string
	ok := Walk([]byte(` {"a" : 1, "b\u0063":{"x":[2]},"d":"}" } `), func(key, val []byte) {
		got = append(got, string(key)+"="+string(val))
	})
	want := `"a"=1 "b\u0063"={"x":[2]} "d"="}"`
	if !ok || strings.Join(got, " ") != want {
		t.Errorf("Walk: %v %q, want %q", ok, got, want)
	}
	for _, in := range []string{`[{"a":1}]`, `"a"`, `1`} {
		if !Walk([]byte(in), func(key, val []byte) { t.Errorf("member %s of %s", key, in) }) {
			t.Errorf("%s not valid", in)
		}
	}
}

// proofBody is a tools/call as a 2026 client sends it, with a KYA-OS
// request proof in params._meta: most of its bytes are inside long
// strings (DIDs, the detached JWS, the nonce and the request hash).
const proofBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` +
	`"_meta":{"org.kya-os/request-proof":{"alg":"EdDSA","audience":"did:web:mcp.example.com","created":1795714019,` +
	`"did":"did:key:z6MknfCw4e8UiLapHLBPML62Eu1yBJb5QLRz6pjZxLMjJz6k","expires":1795714079,` +
	`"jws":"eyJhbGciOiJFZERTQSIsImtpZCI6ImRpZDprZXk6ejZNa25mQ3c0ZThVaUxhcEhMQlBNTDYyRXUxeUJKYjVRTFJ6NnBqWnhMTWpKejZrI3o2TWtuZkN3NGU4VWlMYXBITEJQTUw2MkV1MXlCSmI1UUxSejZwalp4TE1qSno2ayJ9..g7DA2OpAo___b_iK_HOOpVkDbgRfYP_tEt4At1AsZn2fnxJw4A5umy8BAaiZoEaO-3BOe5oT6n-cGy37935DBQ",` +
	`"kid":"did:key:z6MknfCw4e8UiLapHLBPML62Eu1yBJb5QLRz6pjZxLMjJz6k#z6MknfCw4e8UiLapHLBPML62Eu1yBJb5QLRz6pjZxLMjJz6k",` +
	`"nonce":"Fp0kPKVa8J3gxYmP9WFN8g","prf":"org.kya-os/proof.v1","requestHash":"sha-256=:eDiPHzWo25ENE+XuI25PtqtcLahtcgb4Ob65EhlqJCc=:"}}}}`

// BenchmarkValidProofBody is one walk over a proof-bearing body, as each
// of the edge's readers makes.
func BenchmarkValidProofBody(b *testing.B) {
	body := []byte(proofBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(body) {
			b.Fatal("invalid")
		}
	}
}
