package handshake

import (
	"encoding/json"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Legacy KYA forms.

// legacyTools are the tools/call names of the older KYA handshakes.
var legacyTools = map[string]bool{"_mcpi_handshake": true, "_kyaos_handshake": true, "_mcpi": true}

// IsLegacyForm reports whether body is one older KYA handshake message: a
// JSON-RPC "handshake" with KYA params (challenge.IsLegacyHandshake), or a
// tools/call of a legacy tool. Since `legacy_handshake pass` lets these
// through without a credential, the test is strict: one object, and no
// member name of the message or its params repeated or spelt as a case
// variant of another (Unicode folding included, as encoding/json matches
// names: "paramſ" is "params" to it), so that no upstream JSON parser can
// read a different method or tool name than the edge did.
func IsLegacyForm(body []byte) bool {
	c := jsonscan.NewCursor(body)
	if c.Kind() != '{' {
		return false
	}
	top, ok := uniqueMembers(&c, body, "jsonrpc", "id", "method", "params")
	if !ok || !c.Done() {
		return false
	}
	method := top["method"]
	if len(method) == 0 || method[0] != '"' {
		return false
	}
	var name string
	if json.Unmarshal(method, &name) != nil {
		return false
	}
	params := top["params"]
	if len(params) == 0 || params[0] != '{' {
		return false
	}
	pc := jsonscan.NewCursor(params)
	pm, ok := uniqueMembers(&pc, params, "name", "arguments")
	if !ok {
		return false
	}
	switch name {
	case challenge.DefaultHandshakeMethod:
		return challenge.IsLegacyHandshake(body)
	case "tools/call":
		tool := pm["name"]
		if len(tool) == 0 || tool[0] != '"' {
			return false
		}
		var t string
		return json.Unmarshal(tool, &t) == nil && legacyTools[t]
	}
	return false
}

// uniqueMembers reads the object at c, a cursor over doc, and returns the
// values of its members by exact name; ok is false when two names fold
// together or a name is a case variant of one of known (jsonkey.Check),
// or the object is not valid JSON.
func uniqueMembers(c *jsonscan.Cursor, doc []byte, known ...string) (map[string][]byte, bool) {
	var names []string
	out := make(map[string][]byte)
	c.Object()
	for c.NextMember() {
		name := string(jsonscan.Unquote(c.Key()))
		start, end := c.Skip()
		names = append(names, name)
		out[name] = doc[start:end]
	}
	if jsonkey.Check(names, known...) != nil {
		return nil, false
	}
	return out, true
}
