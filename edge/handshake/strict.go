package handshake

import (
	"encoding/json"
	"errors"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// Upstream answers (mcp-i.json, handshake and verify results) are read
// with jsonscan.Object, the project's strict reader: a member name repeated
// in some letter case, or a lone case variant of a member the edge reads
// ("Result", "sessionID"), makes the answer unreadable, since a Go agent's
// encoding/json would read another value there than the edge did.

// rpcResponseMembers are the members of a JSON-RPC response.
var rpcResponseMembers = []string{"jsonrpc", "id", "result", "error"}

// ambiguous reports whether err, from jsonscan.Object, is about member
// names rather than syntax or type.
func ambiguous(err error) bool {
	return errors.Is(err, jsonkey.ErrRepeated) || errors.Is(err, jsonkey.ErrVariant)
}

// present: a member that is there and not null.
func present(raw []byte) bool { return len(raw) > 0 && string(raw) != "null" }

// decodeMember decodes the member name of m (from jsonscan.Object) into v,
// as encoding/json decodes a struct field: absent or null leaves v as it
// is. It reports whether the value had v's type.
func decodeMember(m map[string][]byte, name string, v any) bool {
	raw := m[name]
	return !present(raw) || json.Unmarshal(raw, v) == nil
}
