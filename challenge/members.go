package challenge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Strict reading of message objects: every member name spelt once and
// exactly, so that no other JSON reader takes a different value than the
// edge checked; and the typed reads of member values.

// The members read at each level of a message: a name that folds to one of
// them without being it is refused (jsonkey.ErrVariant).
var (
	requestMembers         = []string{"jsonrpc", "id", "method", "params"}
	handshakeMembers       = []string{"agentDid", "supportedMethods", "version"}
	verifyMembers          = []string{"signedChallenge", "credential"}
	signedChallengeMembers = []string{"challenge", "nonce", "timestamp", "agentDid", "proofValue"}
	legacyParamsMembers    = []string{"supportedMethods", "version", "signedChallenge",
		"nonce", "audience", "timestamp", "agentDid", "clientInfo", "clientProtocolVersion", "clientCapabilities"}
)

// errNotObject: objectMembers was given something other than an object.
var errNotObject = errors.New("not a JSON object")

// objectMembers decodes a JSON object into its raw members. It fails with
// errNotObject for anything else, and with a jsonkey error when two member
// names fold together (an exact repeat included) or a name is a case
// variant of one of known (jsonkey.Check).
func objectMembers(raw []byte, known ...string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, errNotObject
	}
	m := make(map[string]json.RawMessage)
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errNotObject
		}
		name, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errNotObject
		}
		names = append(names, name)
		m[name] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject // trailing data
	}
	if err := jsonkey.Check(names, known...); err != nil {
		return nil, err
	}
	return m, nil
}

// nestedMembers is objectMembers for an object whose values are read or
// passed on (params, signedChallenge; the credential in verify params goes
// to the credential verifier, unknown members into the signing input): it
// also refuses a name repeated at any depth inside them
// (jsonscan.CheckMembers), as ErrRepeatedMember. Not used for the request
// object itself, so that a repeat inside params is ErrInvalidParams; the
// request's other members are scalars, or refused.
func nestedMembers(raw []byte, known ...string) (map[string]json.RawMessage, error) {
	m, err := objectMembers(raw, known...)
	if err != nil {
		return nil, err
	}
	if errors.Is(jsonscan.CheckMembers(raw), ErrRepeatedMember) {
		return nil, ErrRepeatedMember
	}
	return m, nil
}

// paramsError is the ErrInvalidParams for an objectMembers error of the
// object called what.
func paramsError(err error, what string) error {
	if errors.Is(err, errNotObject) {
		return fmt.Errorf("%w: %s must be an object", ErrInvalidParams, what)
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidParams, what, err)
}

func requiredString(m map[string]json.RawMessage, key string) (string, error) {
	v, ok := m[key]
	if !ok {
		return "", fmt.Errorf("%w: %s required", ErrInvalidParams, key)
	}
	s, err := jsonString(v)
	if err != nil {
		return "", fmt.Errorf("%w: %s must be a string", ErrInvalidParams, key)
	}
	return s, nil
}

func isJSONString(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

func isJSONNumber(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal(raw, &n) == nil
}

// jsonString decodes a JSON string (null and other types are errors).
func jsonString(raw []byte) (string, error) {
	if !isJSONString(raw) {
		return "", ErrInvalidParams
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", ErrInvalidParams
	}
	return s, nil
}

// jsonStringArray decodes a JSON array of strings (null is an error).
func jsonStringArray(raw []byte) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, ErrInvalidParams
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, ErrInvalidParams
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, err := jsonString(it)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
