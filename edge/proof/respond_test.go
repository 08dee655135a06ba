package proof

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`

func signer(t testing.TB) Signer {
	priv, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return func() (kyaos.ResponseSigner, error) {
		return kyaos.ResponseSigner{Key: priv.(ed25519.PrivateKey), DID: "did:web:edge", KID: "did:web:edge#k"}, nil
	}
}

// through writes one upstream answer through the wrapper and returns what
// the client gets.
func through(t *testing.T, g *Gate, status int, ctype, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	rw := g.WrapResponse(rec, []byte(call), signer(t), "did:key:zA")
	if ctype != "" {
		rw.Header().Set("Content-Type", ctype)
	}
	rw.WriteHeader(status)
	_, _ = io.WriteString(rw, body)
	if err := rw.Finish(); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestWrapResponse: a JSON result is signed (and only _meta added); SSE,
// errors, non-200 answers and what is not JSON pass through byte for byte.
func TestWrapResponse(t *testing.T) {
	g := New(Config{ResponseProof: SignBody}, nil, nil)
	res := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`
	rec := through(t, g, 200, "application/json", res)
	var out struct{ Result json.RawMessage }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || kyaos.FindResponseProof(out.Result) == nil {
		t.Fatalf("not signed: %s", rec.Body)
	}
	if !strings.HasPrefix(rec.Body.String(), `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"_meta":{"org.kya-os/response-proof":`) ||
		rec.Header().Get("Content-Length") != itoa(rec.Body.Len()) {
		t.Fatalf("rewritten: %s (%s)", rec.Body, rec.Header().Get("Content-Length"))
	}
	for _, c := range []struct {
		status      int
		ctype, body string
	}{
		{200, "text/event-stream", "event: message\ndata: " + res + "\n\n"},
		{200, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`},
		{202, "application/json", res},
		{200, "application/json", `not json`},
	} {
		if rec := through(t, g, c.status, c.ctype, c.body); rec.Code != c.status || rec.Body.String() != c.body {
			t.Errorf("%d %s %q: got %d %q", c.status, c.ctype, c.body, rec.Code, rec.Body)
		}
	}
}

// TestWrapResponseAmbiguousNames: an answer with member names readers take
// differently is neither signed nor passed on : the client
// gets a JSON-RPC error to its request, and nothing of the upstream's body.
func TestWrapResponseAmbiguousNames(t *testing.T) {
	const fake = `{"org.kya-os/response-proof":{"jws":"FAKE"}}`
	for _, mode := range []string{SignBody, SignEnvelope} {
		g := New(Config{ResponseProof: mode}, nil, nil)
		for name, body := range map[string]string{
			"_Meta beside the edge's _meta": `{"jsonrpc":"2.0","id":1,"result":{"content":[],"_Meta":` + fake + `}}`,
			"_META":                         `{"jsonrpc":"2.0","id":1,"result":{"content":[],"_META":` + fake + `}}`,
			"_meta and _Meta":               `{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{},"_Meta":` + fake + `}}`,
			"repeated in the result":        `{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2}}`,
			"repeated deep in content":      `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a","Text":"b"}]}}`,
			"Result":                        `{"jsonrpc":"2.0","id":1,"Result":{"content":[]}}`,
			"result and Result":             `{"jsonrpc":"2.0","id":1,"result":{"content":[]},"Result":{"content":[]}}`,
			"ID":                            `{"jsonrpc":"2.0","ID":1,"result":{"content":[]}}`,
			"repeated in an error":          `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x","Message":"y"}}`,
			// Two documents back to back: readers take the
			// first, the last, or refuse.
			"two documents": `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}{"jsonrpc":"2.0","id":1,"result":` + fake + `}`,
			"two documents, a newline between": `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n" +
				`{"jsonrpc":"2.0","id":1,"result":` + fake + `}`,
			"a document and more": `{"jsonrpc":"2.0","id":1,"result":{"content":[]}} FAKE`,
		} {
			rec := through(t, g, 200, "application/json", body)
			var out struct {
				ID    json.RawMessage
				Error *struct{ Code int }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Error == nil || out.Error.Code != mcp.CodeInternalError || string(out.ID) != "1" {
				t.Errorf("%s, %s: got %d %s, want a JSON-RPC error -32603 to id 1", mode, name, rec.Code, rec.Body)
			}
			if strings.Contains(rec.Body.String(), "FAKE") || strings.Contains(rec.Body.String(), "response-proof") {
				t.Errorf("%s, %s: upstream body or a proof passed: %s", mode, name, rec.Body)
			}
			if rec.Code != 200 || rec.Header().Get("Content-Length") != itoa(rec.Body.Len()) || rec.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("%s, %s: HTTP %d, headers %v", mode, name, rec.Code, rec.Header())
			}
		}
		// A response check before this writer sent on the first of two
		// documents and told it about the rest (Withhold): withheld too.
		rec := httptest.NewRecorder()
		rw := g.WrapResponse(rec, []byte(call), signer(t), "did:key:zA")
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(rw, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
		Withhold(struct{ http.ResponseWriter }{rw}) // not in the chain: no effect
		Withhold(unwrapper{rw})
		if err := rw.Finish(); err != nil || !strings.Contains(rec.Body.String(), `"code":-32603`) || strings.Contains(rec.Body.String(), "result") {
			t.Errorf("%s: after Withhold: %v %s", mode, err, rec.Body)
		}
		// An escaped spelling of _meta is _meta itself, names the edge
		// does not read may differ in case from each other, and trailing
		// whitespace is nothing: signed.
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + " \r\n\t",
			`{"jsonrpc":"2.0","id":1,"result":{"content":[],"_me\u0074a":{}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a","Meta":"b"}],"meta":1}}`,
		} {
			rec := through(t, g, 200, "application/json", body)
			var out struct{ Result json.RawMessage }
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || kyaos.FindResponseProof(out.Result) == nil {
				t.Errorf("%s, %s: not signed: %s", mode, body, rec.Body)
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// body reads s as the edge does, once and strictly.
func body(s string) Body {
	msgs, batch, err := mcp.ParseStrict([]byte(s))
	return Body{Raw: []byte(s), Msgs: msgs, Batch: batch, Err: err}
}

// TestNegotiateAndConfig: the gate refuses only in required mode, every
// message of a batch alike (an undeclared call must not hide behind a
// declared one), and the modes are checked.
func TestNegotiateAndConfig(t *testing.T) {
	ctx := context.Background()
	if New(Config{}, nil, nil).Negotiate(ctx, body(call), "") != nil {
		t.Fatal("optional mode refused")
	}
	g := New(Config{RequireExtension: true}, nil, nil)
	for _, b := range []string{call, `[` + call + `]`, `[{"jsonrpc":"2.0","id":2,"method":"ping"},` + call + `]`} {
		if rf := g.Negotiate(ctx, body(b), ""); rf == nil || rf.RPC.Code != -32021 || rf.Status != http.StatusOK {
			t.Fatalf("required mode, %s: %+v", b, rf)
		}
	}
	for _, b := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`} {
		if rf := g.Negotiate(ctx, body(b), ""); rf != nil {
			t.Errorf("%s refused: %+v", b, rf)
		}
	}
	// What the gate cannot read is not exempt: a ping spelt twice, and a
	// body that is no JSON-RPC, are refused (400).
	for _, b := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"x"}}`, `{"jsonrpc":"1.0","id":1,"method":"tools/call"}`, `not json`} {
		if rf := g.Negotiate(ctx, body(b), ""); rf == nil || rf.Status != http.StatusBadRequest {
			t.Errorf("%s: %+v, want 400", b, rf)
		}
	}
	for _, c := range []Config{{RequestProof: "maybe"}, {ResponseProof: "envelope"}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// FuzzWrapResponse: whatever the upstream answers, the client gets valid
// JSON (or the bytes as they came), and the edge never signs an answer whose
// names are repeated in some letter case.
func FuzzWrapResponse(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"result":{"content":[],"_Meta":{}}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"Result":{"a":1,"a":2}}`)
	f.Add(`[{"jsonrpc":"2.0","id":1,"result":{}}]`)
	sign := signer(f)
	g := New(Config{ResponseProof: SignEnvelope}, nil, nil)
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		rw := g.WrapResponse(rec, []byte(call), sign, "did:key:zA")
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(rw, body)
		if err := rw.Finish(); err != nil {
			t.Fatal(err)
		}
		out := rec.Body.Bytes()
		if string(out) == body {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%q became invalid JSON %q", body, out)
		}
		if strings.Contains(rec.Body.String(), kyaos.ResponseProofKey) && jsonscan.CheckMembers([]byte(body)) != nil {
			t.Fatalf("%q signed despite repeated names: %q", body, out)
		}
	})
}

// unwrapper is a wrapper of another handler between the response check and
// the signer.
type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }
