package kyaos

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// The request reader as it was before it read the body in one pass: a
// walk of the body, of params, of _meta, and then of params again for
// numbers and of _meta again to skip it while canonicalising. Kept as the
// reference the one-pass reader must agree with (TestRequestReadersAgree,
// FuzzRequestReadersAgree).

type walkedRequest struct{ method, params, meta []byte }

func parseRequestWalking(body []byte, namesChecked bool) (walkedRequest, error) {
	var req walkedRequest
	if !namesChecked && jsonscan.CheckMembers(body) != nil {
		return req, errBody
	}
	ok := jsonscan.Walk(body, func(key, val []byte) {
		switch string(jsonscan.Unquote(key)) {
		case "method":
			req.method = val
		case "params":
			req.params = val
		}
	})
	if !ok || firstByte(body) != '{' || len(req.method) == 0 || req.method[0] != '"' {
		return walkedRequest{}, errBody
	}
	if firstByte(req.params) == '{' {
		jsonscan.Walk(req.params, func(k, v []byte) {
			if string(jsonscan.Unquote(k)) == metaKey {
				req.meta = v
			}
		})
	}
	return req, nil
}

func (r walkedRequest) proof() []byte {
	if firstByte(r.meta) != '{' {
		return nil
	}
	var canonical, legacy []byte
	jsonscan.Walk(r.meta, func(k, v []byte) {
		switch string(jsonscan.Unquote(k)) {
		case ProofKey:
			canonical = v
		case LegacyProofKey:
			legacy = v
		}
	})
	if canonical != nil {
		return canonical
	}
	return legacy
}

func (r walkedRequest) ambiguousNumber() bool {
	if r.params == nil {
		return false
	}
	found := false
	jsonscan.Walk(r.params, func(k, v []byte) {
		if !found && (r.meta == nil || string(jsonscan.Unquote(k)) != metaKey) {
			found = hasAmbiguousNumber(v)
		}
	})
	return found
}

// requestHash is the hash as it was computed: _meta skipped by name while
// canonicalising, else JCS of the rebuilt request.
func (r walkedRequest) requestHash() (string, error) {
	canon, ok := append([]byte(nil), `{"method":`...), true
	var rest []byte
	if canon, rest, ok = appendCanonical(canon, r.method); ok && len(trimWS(rest)) == 0 && r.params != nil {
		canon = append(canon, `,"params":`...)
		skip := ""
		if r.meta != nil {
			skip = metaKey
		}
		canon, rest, ok = appendCanonicalSkipping(canon, r.params, skip)
	}
	if !ok || len(trimWS(rest)) != 0 {
		var b bytes.Buffer
		b.WriteString(`{"method":`)
		b.Write(r.method)
		if r.params != nil {
			b.WriteString(`,"params":`)
			b.Write(request{params: r.params, meta: r.meta}.covered())
		}
		b.WriteByte('}')
		var err error
		if canon, err = jcs.Transform(b.Bytes()); err != nil {
			return "", errBody
		}
	} else {
		canon = append(canon, '}')
	}
	return string(appendHashHeader(nil, canon)), nil
}

// checkRequestReaders compares the one-pass reader with the walking one on
// body, names checked by the reader and (when CheckMembers accepts body)
// taken as checked by the caller.
func checkRequestReaders(t *testing.T, body []byte) {
	t.Helper()
	for _, checked := range []bool{false, true} {
		got, gotErr := parseRequestChecked(body, checked)
		want, wantErr := parseRequestWalking(body, checked)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q (names checked %v): one pass %v, walking %v", body, checked, gotErr, wantErr)
		}
		if gotErr != nil {
			continue
		}
		same := func(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }
		if !same(got.method, want.method) || !same(got.params, want.params) || !same(got.meta, want.meta) ||
			!same(got.proof(), want.proof()) {
			t.Fatalf("%q (names checked %v): one pass %q %q %q %q, walking %q %q %q %q", body, checked,
				got.method, got.params, got.meta, got.proof(), want.method, want.params, want.meta, want.proof())
		}
		if a, b := got.ambiguousNumber(), want.ambiguousNumber(); a != b {
			t.Fatalf("%q (names checked %v): ambiguous number: one pass %v, walking %v", body, checked, a, b)
		}
		// The proof Verify reads: from its members as the one pass read
		// them, and by parse walking the raw proof as before.
		var proofs [2]proofReader
		if _, err := readRequest(body, checked, &proofs); err != nil {
			t.Fatalf("%q: readRequest %v after parseRequestChecked accepted it", body, err)
		}
		if raw := want.proof(); raw != nil {
			read := &proofs[0]
			if got.canonical == nil {
				read = &proofs[1]
			}
			var fromPass, fromWalk Proof
			passErr, walkErr := read.finish(raw, &fromPass), fromWalk.parse(raw, true)
			if ReasonOf(passErr) != ReasonOf(walkErr) || passErr == nil && fromPass != fromWalk {
				t.Fatalf("%q (names checked %v): proof from the pass %+v (%v), walked %+v (%v)", body, checked, fromPass, passErr, fromWalk, walkErr)
			}
		}
		gotHash, gotErr := got.requestHash()
		wantHash, wantErr := want.requestHash()
		if gotHash != wantHash || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q (names checked %v): hash: one pass %q (%v), walking %q (%v)", body, checked, gotHash, gotErr, wantHash, wantErr)
		}
	}
}

// withProofs puts proofs (raw JSON) in params._meta of a tools/call, under
// the canonical key, then the legacy one, then any key given after "|".
func withProofs(canonical, legacy string) string {
	meta := ""
	if canonical != "" {
		meta = `"org.kya-os/request-proof":` + canonical
	}
	if legacy != "" {
		if meta != "" {
			meta += ","
		}
		meta += `"org.kya-os/proof@1":` + legacy
	}
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","_meta":{` + meta + `},"arguments":{"n":1}}}`
}

var requestReaderInputs = []string{
	call,
	withProofs(validProof, ""),
	withProofs("", validProof),
	withProofs(validProof, `{"x":1}`),
	withProofs(`{"x":1}`, validProof),
	withProofs(`"not an object"`, validProof),
	withProofs(strings.Replace(validProof, `"created":10`, `"created":"10"`, 1), ""),
	withProofs(strings.Replace(validProof, `"created":10`, `"created":1e1`, 1), ""),
	withProofs(strings.Replace(validProof, `"nonce":"abc_-1"`, `"nonce":"abc_-1","extra":1`, 1), ""),
	withProofs(strings.Replace(validProof, `"jws"`, `"\u006aws"`, 1), ""),
	withProofs(strings.Replace(validProof, `"jws":"eyJ..c2ln"`, `"jws":"eyJ..c2ln","cnf":{"jkt":"abc"}`, 1), ""),
	withProofs(strings.Replace(validProof, `"jws":"eyJ..c2ln"`, `"jws":"eyJ..c2ln","cnf":{"jkt":"abc","x":1}`, 1), ""),
	withProofs(strings.Replace(validProof, `"did":"did:key:z6Mk"`, `"did":"did:key:z6Mk","did":"did:key:z6Mx"`, 1), ""),
	withProofs(strings.Replace(validProof, `"alg":"EdDSA"`, `"alg":null,"alg":"EdDSA"`, 1), ""),
	withProofs(validProof+`,"org.kya-os/request-proof":"x"`, ""),
	withProofs(`"x","org.kya-os/request-proof":`+validProof, ""),
	withProofs(`{"x":1},"org.kya-os/request-proof":`+validProof, ""),
	withProofs(strings.Replace(validProof, `"audience":"did:web:s"`, `"audience":"did:web:\u00e9"`, 1), ""),
	withProofs(strings.Replace(validProof, `{`, ` { `, 1), ""),
	`{"method":"m","params":{"name":"n","_meta":{"org.kya-os/request-proof":{"a":1},"org.kya-os/proof@1":{"b":2}},"z":1e400}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/proof@1":{"b":2}}}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":null,"org.kya-os/proof@1":{"b":2}}}}`,
	`{"method":"m","params":{"_meta":[{"org.kya-os/request-proof":{}}]}}`,
	`{"method":"m","params":{"_meta":"x","a":9007199254740993}}`,
	`{"method":"m","params":{"a":9007199254740993,"_meta":{"n":9007199254740993}}}`,
	`{"method":"m","params":{"a":1,"_meta":{"n":9007199254740993},"b":0.1}}`,
	`{"method":"m","params":{"_meta":{"n":9007199254740993},"b":12345678901234567890}}`,
	`{"method":"m","params":{"b":"9007199254740993","_meta":{}}}`,
	`{"method":"m","params":[9007199254740993,{"_meta":{}}]}`,
	`{"method":"m","params":7}`, `{"method":"m","params":null}`, `{"method":"m"}`, `{"method":1}`, `[]`, `"m"`,
	`{"method":"m","params":{"\u005fmeta":{"org.kya-os/request-proof":{}},"b":1}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":{}}},"params":{"a":1}}`,
	`{"method":"m","params":{"a":1},"params":{"_meta":{"org.kya-os/request-proof":{}}}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":1},"_meta":{"x":2}}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":1,"org.kya-os/request-proof":2}}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/proof@1":1,"org.kya-os/proof@1":2}}}`,
	`{"method":"a","method":"b","params":{}}`,
	` { "method" : "m" , "params" : { "z" : [ 1 , 2 ] , "_meta" : { "org.kya-os/request-proof" : { "k" : "v" } } , "a" : { } } } `,
	`{"method":"m","params":{"a":{"_meta":1},"_meta":2,"z":[{"_meta":3}]}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":{}}}} x`,
	`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":{}}}`,
	`{"method":"m","params":{"_meta":{"org.kya-os/request-proof":{"x":"\u00e9"}},"é":1}}`,
	`{"method":"m\n","params":{"_meta":{}}}`,
}

// TestRequestReadersAgree: the one-pass reader finds what the walking one
// found, on requests shaped to part them (repeats in every place, _meta
// first, last, escaped, not an object, numbers on either side of it).
func TestRequestReadersAgree(t *testing.T) {
	for _, in := range requestReaderInputs {
		checkRequestReaders(t, []byte(in))
	}
}

func FuzzRequestReadersAgree(f *testing.F) {
	for _, in := range requestReaderInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(checkRequestReaders)
}
