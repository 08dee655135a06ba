// Package extension reads and enforces the client's declaration of the
// KYA-OS MCP extension (org.kya-os/decentralized-authority, docs/protocol/kyaos.md#declarations): in
// the per-request _meta clientCapabilities of MCP 2026-07-28, or in the
// initialize capabilities of 2025-11-25, and the decision table of a
// server that may require it.
package extension

import (
	"encoding/json"
	"regexp"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// ID is the extension's identifier.
const ID = "org.kya-os/decentralized-authority"

// ClientCapabilitiesKey is the _meta member that carries a 2026 client's
// capabilities on every request.
const ClientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities"

// State is what a request declares.
type State int

const (
	// Absent: no entry for ID (or no clientCapabilities/extensions object).
	Absent State = iota
	// Malformed: an entry that is not a valid settings object.
	Malformed
	// Declared: a valid settings object ({} included: the defaults).
	Declared
)

// Declaration returns what the JSON-RPC request body declares. A
// per-request entry decides, even a malformed one; without one, the
// initialize-era capabilities (initCaps, the initialize request's
// params.capabilities of the session, nil when none) apply.
func Declaration(body, initCaps []byte) State {
	return RequestState(body, InitializeState(initCaps))
}

// InitializeState is what initialize-era capabilities (an initialize
// request's params.capabilities) declare: Absent when they hold no entry.
func InitializeState(caps []byte) State {
	if entry, ok := entryOf(caps); ok {
		return validate(entry)
	}
	return Absent
}

// RequestState is what the request body declares per request, or
// fallback (the session's initialize-era state) when it has no
// per-request entry.
func RequestState(body []byte, fallback State) State {
	meta := jsonscan.Member(jsonscan.Member(body, "params"), "_meta")
	if entry, ok := entryOf(jsonscan.Member(meta, ClientCapabilitiesKey)); ok {
		return validate(entry)
	}
	return fallback
}

// entryOf returns capabilities.extensions[ID] and whether it is present
// ("present" means an own member of an extensions object).
func entryOf(caps []byte) ([]byte, bool) {
	ext := jsonscan.Member(caps, "extensions")
	if len(ext) == 0 || ext[0] != '{' {
		return nil, false
	}
	found := false
	var entry []byte
	jsonscan.Walk(ext, func(k, v []byte) {
		if string(jsonscan.Unquote(k)) == ID {
			entry, found = v, true
		}
	})
	return entry, found
}

var (
	semver    = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	didMethod = regexp.MustCompile(`^did:[a-z0-9]+$`)
)

// validate checks a settings object (docs/protocol/kyaos.md#declarations); unknown members are
// ignored, and a repeated member name makes it malformed.
func validate(entry []byte) State {
	if len(entry) == 0 || entry[0] != '{' || jsonscan.CheckMembers(entry) != nil {
		return Malformed
	}
	var s map[string]json.RawMessage
	if json.Unmarshal(entry, &s) != nil {
		return Malformed
	}
	if v, ok := s["version"]; ok {
		var str string
		if json.Unmarshal(v, &str) != nil || v[0] != '"' || !semver.MatchString(str) {
			return Malformed
		}
	}
	if v, ok := s["proofProfiles"]; ok && !uniqueStrings(v, func(x string) bool { return x != "" }) {
		return Malformed
	}
	if v, ok := s["didMethods"]; ok && !uniqueStrings(v, didMethod.MatchString) {
		return Malformed
	}
	if v, ok := s["required"]; ok && string(v) != "true" && string(v) != "false" {
		return Malformed
	}
	return Declared
}

// uniqueStrings: a non-empty array of distinct strings each passing ok.
func uniqueStrings(v json.RawMessage, ok func(string) bool) bool {
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	var l []json.RawMessage
	if json.Unmarshal(v, &l) != nil || len(l) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, e := range l {
		var s string
		if len(e) == 0 || e[0] != '"' || json.Unmarshal(e, &s) != nil || !ok(s) || seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

// Exempt reports whether a method is never gated: server/discover (so a
// client can learn what it must declare) and ping.
func Exempt(method string) bool { return method == "server/discover" || method == "ping" }

// Error codes of a refused declaration (docs/protocol/kyaos.md#declarations).
const (
	CodeNotDeclared = -32021
	CodeMalformed   = -32602
)

// Decision is the outcome of the gate for one request.
type Decision struct {
	// Refused: answer with Error instead of serving.
	Refused bool
	// Active: the client declared the extension.
	Active bool
	// Error is the JSON-RPC error object of a refusal.
	Error *RPCError
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// Decide applies the table of docs/protocol/kyaos.md#declarations. In optional mode nothing is
// refused; in required mode an undeclared client gets -32021 and a
// malformed declaration -32602, except on exempt methods.
func Decide(method string, st State, required bool) Decision {
	d := Decision{Active: st == Declared}
	if !required || Exempt(method) || st == Declared {
		return d
	}
	d.Refused = true
	if st == Malformed {
		d.Error = &RPCError{Code: CodeMalformed,
			Message: "Invalid params: malformed " + ID + " declaration",
			Data:    map[string]any{"reason": "malformed_declaration", "extension": ID}}
		return d
	}
	d.Error = &RPCError{Code: CodeNotDeclared,
		Message: "Missing required client capability: " + ID,
		Data: map[string]any{
			"requiredCapabilities": map[string]any{"extensions": map[string]any{ID: map[string]any{}}},
			"reason":               "extension_not_declared",
			"extension":            ID,
		}}
	return d
}

// ServerSettings is what a server advertises for the extension in its
// server/discover (or initialize) result capabilities.extensions[ID].
func ServerSettings(required bool) map[string]any {
	return map[string]any{
		"version":       "1.0.0",
		"proofProfiles": []string{"org.kya-os/proof.v1"},
		"didMethods":    []string{"did:key", "did:web"},
		"required":      required,
	}
}
