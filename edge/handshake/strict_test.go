package handshake

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// Upstream answers are read strictly: a member name repeated in some letter
// case, a lone case variant of a member the edge reads, trailing data or a
// value of the wrong type makes the answer unreadable.

func TestParseDocumentStrict(t *testing.T) {
	const ok = `{"mcp_i":{"version":"2.0.0","endpoints":{"handshake":"/hs","verify":"/vf"},"supportedMethods":["Ed25519"]}}`
	if d := ParseDocument([]byte(ok)); d == nil || d.endpoints(nil, "x") == nil || d.MCPI.Version != "2.0.0" || len(d.MCPI.SupportedMethods) != 1 {
		t.Fatalf("the control document was not read: %+v", d)
	}
	for name, doc := range map[string]string{
		"mcp_i repeated":               `{"mcp_i":{"endpoints":{"handshake":"/a"}},"mcp_i":{"endpoints":{"handshake":"/b"}}}`,
		"mcp_i and MCP_I":              `{"mcp_i":{"endpoints":{"handshake":"/a"}},"MCP_I":{"endpoints":{"handshake":"/b"}}}`,
		"lone MCP_I":                   `{"MCP_I":{"endpoints":{"handshake":"/a"}}}`,
		"handshake repeated":           `{"mcp_i":{"endpoints":{"handshake":"/a","handshake":"/b"}}}`,
		"handshake and Handshake":      `{"mcp_i":{"endpoints":{"handshake":"/a","Handshake":"/b"}}}`,
		"lone Handshake":               `{"mcp_i":{"endpoints":{"Handshake":"/a"}}}`,
		"lone Endpoints":               `{"mcp_i":{"Endpoints":{"handshake":"/a"}}}`,
		"Kelvin-sign variant":          `{"mcp_i":{"endpoints":{"handshake":"/a","verify":"/v","\u212aey":1,"key":2}}}`,
		"trailing data":                ok + ` {"mcp_i":{}}`,
		"trailing garbage":             ok + `x`,
		"version a number":             `{"mcp_i":{"version":2,"endpoints":{"handshake":"/a"}}}`,
		"endpoints an array":           `{"mcp_i":{"endpoints":["/a"]}}`,
		"endpoint not a string":        `{"mcp_i":{"endpoints":{"handshake":1}}}`,
		"supportedMethods a string":    `{"mcp_i":{"endpoints":{"handshake":"/a"},"supportedMethods":"Ed25519"}}`,
		"mcp_i an array":               `{"mcp_i":[]}`,
		"top level null":               `null`,
		"top level array":              `[` + ok + `]`,
		"repeat deep in unread member": `{"mcp_i":{"endpoints":{"handshake":"/a"}},"x":{"y":1,"Y":2}}`,
	} {
		if d := ParseDocument([]byte(doc)); d != nil {
			t.Errorf("%s: read as %+v", name, d.MCPI)
		}
	}
}

func TestUpstreamSessionOfStrict(t *testing.T) {
	sess := `"sessionId":"` + testSessionID + `"`
	for _, tc := range []struct {
		name string
		body string
		why  string
	}{
		{"sessionId repeated", `{"result":{"verified":true,` + sess + `,"sessionId":"` + strings.Repeat("b", 36) + `"}}`, "ambiguous"},
		{"sessionId and SessionId", `{"result":{"verified":true,` + sess + `,"SessionId":"` + strings.Repeat("b", 36) + `"}}`, "ambiguous"},
		{"lone SessionID", `{"result":{"verified":true,"SessionID":"` + testSessionID + `"}}`, "ambiguous"},
		{"lone Verified", `{"result":{"Verified":true,` + sess + `}}`, "ambiguous"},
		{"agentDid and AgentDid", `{"result":{"verified":true,` + sess + `,"agentDid":"` + testAgent + `","AgentDid":"did:web:other.example"}}`, "ambiguous"},
		{"lone Result", `{"Result":{"verified":true,` + sess + `}}`, "ambiguous"},
		{"result repeated", `{"result":{"verified":false},"result":{"verified":true,` + sess + `}}`, "ambiguous"},
		{"trailing data", `{"result":{"verified":true,` + sess + `}} {}`, "not_json_rpc"},
		{"verified a string", `{"result":{"verified":"true",` + sess + `}}`, "bad_result"},
		{"expiresAt a number", `{"result":{"verified":true,` + sess + `,"expiresAt":1}}`, "bad_expiry"},
		{"agentDid a number", `{"result":{"verified":true,` + sess + `,"agentDid":1}}`, "other_agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, why := UpstreamSessionOf(http.StatusOK, http.Header{}, []byte(tc.body), testAgent)
			if why != tc.why || s.id != "" {
				t.Fatalf("why %q (session %q), want %q", why, s.id, tc.why)
			}
		})
	}
}

func TestResultOfStrict(t *testing.T) {
	read := func(body string) (string, bool, error) {
		res, ok, err := ResultOf(&Captured{Status: http.StatusOK, Header: http.Header{}, Body: []byte(body)})
		return res.Nonce, ok, err
	}
	if nonce, ok, err := read(`{"jsonrpc":"2.0","id":1,"result":{"challenge":"c","nonce":"n1","expiresIn":60}}`); !ok || err != nil || nonce != "n1" {
		t.Fatalf("the control answer: %q %v %v", nonce, ok, err)
	}
	if _, ok, err := read(`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}`); ok || err != nil {
		t.Fatalf("a JSON-RPC error is relayed: %v %v", ok, err)
	}
	for name, body := range map[string]string{
		"nonce repeated":         `{"result":{"challenge":"c","nonce":"n1","nonce":"n2"}}`,
		"nonce and Nonce":        `{"result":{"challenge":"c","nonce":"n1","Nonce":"n2"}}`,
		"lone Nonce":             `{"result":{"challenge":"c","Nonce":"n1"}}`,
		"lone Result":            `{"Result":{"challenge":"c","nonce":"n1"}}`,
		"result and Error":       `{"result":{"challenge":"c","nonce":"n1"},"Error":{"code":-1}}`,
		"trailing data":          `{"result":{"challenge":"c","nonce":"n1"}}{}`,
		"nonce a number":         `{"result":{"challenge":"c","nonce":1}}`,
		"null nonce":             `{"result":{"challenge":"c","nonce":null}}`,
		"expiresIn a string":     `{"result":{"challenge":"c","nonce":"n1","expiresIn":"60"}}`,
		"expiresIn a fraction":   `{"result":{"challenge":"c","nonce":"n1","expiresIn":1.5}}`,
		"result an array":        `{"result":["c","n1"]}`,
		"neither result nor err": `{"jsonrpc":"2.0","id":1}`,
	} {
		if nonce, ok, err := read(body); ok || !errors.Is(err, ErrUpstreamResponse) {
			t.Errorf("%s: nonce %q, ok %v, err %v; want ErrUpstreamResponse", name, nonce, ok, err)
		}
	}
}

// FuzzResultOf: a handshake answer the edge accepts reads the same to a Go
// agent's encoding/json (whose case-insensitive, last-wins matching the
// strict reader guards against).
func FuzzResultOf(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"challenge":"c","nonce":"n1","expiresIn":60}}`))
	f.Add([]byte(`{"result":{"challenge":"c","nonce":"n1","Nonce":"n2"}}`))
	f.Add([]byte(`{"error":{"code":-1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, ok, err := ResultOf(&Captured{Status: http.StatusOK, Header: http.Header{}, Body: body})
		if !ok {
			return
		}
		var lenient struct {
			Result struct {
				Challenge, Nonce string
				ExpiresIn        int64
			}
		}
		if err != nil || json.Unmarshal(body, &lenient) != nil || lenient.Result.Challenge != res.Challenge ||
			lenient.Result.Nonce != res.Nonce || lenient.Result.ExpiresIn != res.ExpiresIn {
			t.Fatalf("%q: edge read %+v (%v), encoding/json %+v", body, res, err, lenient.Result)
		}
	})
}
