package extension

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestNegotiationVectors runs negotiation.json: each vector's pass/fail,
// and for failures the code and reason we answer with (docs/protocol/kyaos.md#vectors: the
// malformed-required vector's text still says -32021; the current spec and
// this project answer -32602 malformed_declaration).
func TestNegotiationVectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "kya-os-mcp", "negotiation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			ID       string
			Expected string
			Input    struct {
				ServerSettings         struct{ Required bool }
				Request                json.RawMessage
				InitializeCapabilities json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		active bool
		code   int
		reason string
	}{
		"negotiation/declared-optional":          {active: true},
		"negotiation/absent-optional":            {},
		"negotiation/absent-required":            {code: -32021, reason: "extension_not_declared"},
		"negotiation/malformed-required":         {code: -32602, reason: "malformed_declaration"},
		"negotiation/absent-required-discover":   {},
		"negotiation/legacy-initialize-required": {active: true},
		"negotiation/empty-object-required":      {active: true},
		"negotiation/malformed-optional":         {},
	}
	if len(file.Vectors) != len(want) {
		t.Fatalf("%d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.ID, func(t *testing.T) {
			w := want[v.ID]
			if (w.code == 0) != (v.Expected == "pass") {
				t.Fatalf("table disagrees with %q", v.Expected)
			}
			var m struct{ Method string }
			_ = json.Unmarshal(v.Input.Request, &m)
			st := Declaration(v.Input.Request, v.Input.InitializeCapabilities)
			d := Decide(m.Method, st, v.Input.ServerSettings.Required)
			if d.Refused != (w.code != 0) || d.Active != w.active {
				t.Fatalf("decision %+v (state %d)", d, st)
			}
			if w.code != 0 && (d.Error.Code != w.code || d.Error.Data["reason"] != w.reason || d.Error.Data["extension"] != ID) {
				t.Fatalf("error %+v", d.Error)
			}
		})
	}
}

// TestDeclarationMalformed: each settings rule of a declaration.
func TestDeclarationMalformed(t *testing.T) {
	wrap := func(entry string) []byte {
		return []byte(`{"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"org.kya-os/decentralized-authority":` + entry + `}}}}}`)
	}
	cases := map[string]State{
		`{}`:                                     Declared,
		`{"version":"1.2.3-rc.1","x":[1]}`:       Declared,
		`{"didMethods":["did:key","did:cheqd"]}`: Declared,
		`null`:                                   Malformed,
		`"x"`:                                    Malformed,
		`[]`:                                     Malformed,
		`{"version":"1.0"}`:                      Malformed,
		`{"version":null}`:                       Malformed,
		`{"proofProfiles":[]}`:                   Malformed,
		`{"proofProfiles":["a","a"]}`:            Malformed,
		`{"proofProfiles":[""]}`:                 Malformed,
		`{"proofProfiles":[1]}`:                  Malformed,
		`{"didMethods":["did:Key"]}`:             Malformed,
		`{"didMethods":["key"]}`:                 Malformed,
		`{"required":"yes"}`:                     Malformed,
		`{"version":"1.0.0","version":"1.0.0"}`:  Malformed,
		`{"version":"1.0.0","VERSION":"x"}`:      Malformed,
	}
	for entry, want := range cases {
		if got := Declaration(wrap(entry), nil); got != want {
			t.Errorf("%s: got %d want %d", entry, got, want)
		}
	}
	// A malformed per-request entry does not fall back to initialize.
	init := []byte(`{"extensions":{"org.kya-os/decentralized-authority":{}}}`)
	if got := Declaration(wrap(`[]`), init); got != Malformed {
		t.Errorf("fallback: %d", got)
	}
	if got := Declaration([]byte(`{"method":"m","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":[]}}}}`), init); got != Declared {
		t.Errorf("extensions not an object: the initialize entry applies, got %d", got)
	}
}

// FuzzDeclaration: any body reads without panicking.
func FuzzDeclaration(f *testing.F) {
	f.Add([]byte(`{"params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"org.kya-os/decentralized-authority":{}}}}}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, body, init []byte) {
		_ = Decide("tools/call", Declaration(body, init), true)
	})
}
