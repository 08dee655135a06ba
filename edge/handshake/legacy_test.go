package handshake

import (
	"encoding/json"
	"testing"
)

func TestIsLegacyForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"KYA handshake", `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"nonce":"n","audience":"a","timestamp":1,"agentDid":"did:key:z"}}`, true},
		{"tools/call _mcpi_handshake", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi_handshake","arguments":{}}}`, true},
		{"tools/call _kyaos_handshake", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_kyaos_handshake"}}`, true},
		{"tools/call _mcpi", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}`, true},

		{"MCP-I handshake", `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"did:key:z","supportedMethods":["x"]}}`, false},
		{"another tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, false},
		{"repeated method", `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"_mcpi"}}`, false},
		{"case variant of method", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"x","params":{"name":"_mcpi"}}`, false},
		{"folded params name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"},"paramſ":{"name":"echo"}}`, false},
		{"repeated tool name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi","name":"shell"}}`, false},
		{"case variant of tool name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi","NAME":"shell"}}`, false},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}]`, false},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}} {}`, false},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":1,"params":{"name":"_mcpi"}}`, false},
		{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["_mcpi"]}`, false},
		{"tool not a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":["_mcpi"]}}`, false},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, false},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"`, false},
		{"not JSON", "\xff\xfe", false},
		{"empty", ``, false},
	} {
		if got := IsLegacyForm([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: IsLegacyForm = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// FuzzIsLegacyForm: whatever IsLegacyForm passes (without a credential,
// under `legacy_handshake pass`), encoding/json reads as one legacy
// message too: the same method, and for tools/call a legacy tool.
func FuzzIsLegacyForm(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"nonce":"n","audience":"a"}}`))
	f.Add([]byte(`{"method":"tools/call","params":{"name":"_mcpi","NAME":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !IsLegacyForm(data) {
			return
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.Unmarshal(data, &msg); err != nil {
			t.Fatalf("passed, but encoding/json refuses it: %v", err)
		}
		switch msg.Method {
		case "handshake":
		case "tools/call":
			if !legacyTools[msg.Params.Name] {
				t.Fatalf("passed as legacy, but encoding/json reads tool %q", msg.Params.Name)
			}
		default:
			t.Fatalf("passed as legacy, but encoding/json reads method %q", msg.Method)
		}
	})
}
