package challenge

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the JSON-RPC version every message carries.
const Version = "2.0"

// Default method names (ours, docs/protocol/mcpi.md#level-3-the-handshake); see WithMethods.
const (
	DefaultHandshakeMethod = "handshake"
	DefaultVerifyMethod    = "verify"
)

// DefaultMaxRequestSize is the request size limit ParseRequest applies when
// given maxSize <= 0.
const DefaultMaxRequestSize = 64 << 10

// Field limits enforced by the params parsers.
const (
	maxDIDLen         = 2048
	maxTokenLen       = 512 // challenge, nonce (ours are 43 and 32 characters)
	maxProofValueLen  = 512
	maxMethods        = 16
	maxMethodNameLen  = 64
	maxVersionLen     = 64
	maxTimestampLen   = 64
	maxNumericTSDigit = 16
)

// Request is a JSON-RPC 2.0 request object.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC 2.0 response object: exactly one of Result and
// Error is set. Build it with ResultResponse or ErrorResponse.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC 2.0 error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// HandshakeParams are the params of a handshake request. AgentDID is
// required; SupportedMethods and Version are optional.
type HandshakeParams struct {
	AgentDID         string   `json:"agentDid"`
	SupportedMethods []string `json:"supportedMethods,omitempty"`
	Version          string   `json:"version,omitempty"`
}

// HandshakeResult is the result of a handshake: the challenge to sign, the
// nonce it is stored under, the signature methods the edge accepts and the
// challenge lifetime in seconds.
type HandshakeResult struct {
	Challenge        string   `json:"challenge"`
	Nonce            string   `json:"nonce"`
	SupportedMethods []string `json:"supportedMethods"`
	ExpiresIn        int64    `json:"expiresIn"`
}

// SignedChallenge is the agent's answer. ProofValue is a signature, by a key
// in AgentDID's authentication relationship, over the JCS (RFC 8785) bytes of
// the object without proofValue. Members other than the five named ones are
// kept (and covered by the signature) but otherwise ignored.
type SignedChallenge struct {
	Challenge  string
	Nonce      string
	Timestamp  Timestamp
	AgentDID   string
	ProofValue string

	// extra holds unknown members as received, so the signing input is the
	// object the agent signed.
	extra map[string]json.RawMessage
}

// VerifyParams are the params of a verify request. Credential is the
// delegation: a JSON string holding a VC-JWT, or a JSON VC object.
type VerifyParams struct {
	SignedChallenge SignedChallenge `json:"signedChallenge"`
	Credential      json.RawMessage `json:"credential"`
}

// VerifyResult is the result of a successful verify. ExpiresAt (RFC 3339) is
// the session's expiry, or the credential's when no session is issued.
type VerifyResult struct {
	Verified  bool      `json:"verified"`
	SessionID string    `json:"sessionId,omitempty"`
	AgentDID  string    `json:"agentDid"`
	UserDID   string    `json:"userDid,omitempty"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Kind says which call a request is.
type Kind int

const (
	// KindHandshake is a handshake with {agentDid, supportedMethods, version}.
	KindHandshake Kind = iota + 1
	// KindVerify is a verify with {signedChallenge, credential}.
	KindVerify
	// KindLegacyHandshake is the older KYA handshake (see
	// IsLegacyHandshake). Its params are not parsed; pass the request
	// through untouched.
	KindLegacyHandshake
)

// Call is a parsed request.
type Call struct {
	// ID is the request id (a JSON string or number), for the response.
	ID json.RawMessage
	// Method as sent.
	Method string
	Kind   Kind
	// Handshake is set for KindHandshake, Verify for KindVerify.
	Handshake *HandshakeParams
	Verify    *VerifyParams
}

// ParseOption configures ParseRequest.
type ParseOption func(*parseConfig)

type parseConfig struct {
	handshake, verify string
}

// WithMethods sets the method names of the handshake and verify calls
// (defaults "handshake" and "verify"). An empty name keeps the default.
func WithMethods(handshake, verify string) ParseOption {
	return func(c *parseConfig) {
		if handshake != "" {
			c.handshake = handshake
		}
		if verify != "" {
			c.verify = verify
		}
	}
}

// ParseRequest parses one JSON-RPC 2.0 request of at most maxSize bytes
// (DefaultMaxRequestSize if maxSize <= 0). Errors wrap ErrParse (not JSON),
// ErrInvalidRequest (too large, a batch, a notification, a bad id, jsonrpc
// not "2.0", a member other than jsonrpc/id/method/params), ErrMethodNotFound
// or ErrInvalidParams. When the id could be read, the returned Call is
// non-nil even on error, so the caller can answer with ErrorResponse(c.ID,
// err).
//
// A legacy KYA handshake (IsLegacyHandshake) is returned as
// KindLegacyHandshake whatever the configured handshake name.
//
// Params must be an object. Unknown params members are ignored (unknown
// members of signedChallenge are kept: they are signed).
//
// The request object, params and signedChallenge must not repeat a member
// name, nor spell a name as a case variant of another or of a member read
// here, Unicode folding included ("Credential", "paramſ"): ErrInvalidRequest
// at the top level, else ErrInvalidParams. No object nested in params (a
// credential object, an unknown member's value) may repeat a name either
// (ErrInvalidParams). The error for a repeat, at any level, also wraps
// ErrRepeatedMember. A proxy forwards the request as
// received, and an upstream decoding it with Go's encoding/json (which
// matches names case-insensitively, last one winning) would otherwise read
// another value than the one checked here.
func ParseRequest(data []byte, maxSize int, opts ...ParseOption) (*Call, error) {
	cfg := parseConfig{handshake: DefaultHandshakeMethod, verify: DefaultVerifyMethod}
	for _, o := range opts {
		o(&cfg)
	}
	if maxSize <= 0 {
		maxSize = DefaultMaxRequestSize
	}
	if len(data) > maxSize {
		return nil, fmt.Errorf("%w: request larger than %d bytes", ErrInvalidRequest, maxSize)
	}
	if !json.Valid(data) {
		return nil, ErrParse
	}
	members, err := objectMembers(data, requestMembers...)
	switch {
	case errors.Is(err, errNotObject):
		return nil, fmt.Errorf("%w: not a request object (batches are not supported)", ErrInvalidRequest)
	case err != nil:
		// Not even the id can be read: which one would the client match?
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	idRaw, ok := members["id"]
	if !ok {
		return nil, fmt.Errorf("%w: notifications are not supported", ErrInvalidRequest)
	}
	if !isJSONString(idRaw) && !isJSONNumber(idRaw) {
		return nil, fmt.Errorf("%w: id must be a string or a number", ErrInvalidRequest)
	}
	call := &Call{ID: append(json.RawMessage(nil), idRaw...)}
	for k := range members {
		switch k {
		case "jsonrpc", "id", "method", "params":
		default:
			return call, fmt.Errorf("%w: unexpected member", ErrInvalidRequest)
		}
	}
	if v, err := jsonString(members["jsonrpc"]); err != nil || v != Version {
		return call, fmt.Errorf("%w: jsonrpc must be %q", ErrInvalidRequest, Version)
	}
	method, err := jsonString(members["method"])
	if err != nil {
		return call, fmt.Errorf("%w: method must be a string", ErrInvalidRequest)
	}
	call.Method = method
	params, hasParams := members["params"]

	if method == DefaultHandshakeMethod && hasParams && isLegacyParams(params) {
		call.Kind = KindLegacyHandshake
		return call, nil
	}
	switch method {
	case cfg.handshake:
		call.Kind = KindHandshake
		if !hasParams {
			return call, fmt.Errorf("%w: params required", ErrInvalidParams)
		}
		p, err := ParseHandshakeParams(params)
		if err != nil {
			return call, err
		}
		call.Handshake = p
	case cfg.verify:
		call.Kind = KindVerify
		if !hasParams {
			return call, fmt.Errorf("%w: params required", ErrInvalidParams)
		}
		p, err := ParseVerifyParams(params)
		if err != nil {
			return call, err
		}
		call.Verify = p
	default:
		return call, ErrMethodNotFound
	}
	return call, nil
}

// IsLegacyHandshake reports whether data is the older KYA handshake:
// a JSON-RPC request with method "handshake" whose params object has none of
// supportedMethods, version or signedChallenge and at least one of nonce,
// audience, timestamp, clientInfo, clientProtocolVersion, clientCapabilities
// (the KYA-OS form {nonce, audience, timestamp, agentDid, clientInfo}).
// Callers pass such requests through untouched.
func IsLegacyHandshake(data []byte) bool {
	members, err := objectMembers(data, requestMembers...)
	if err != nil {
		return false
	}
	if m, err := jsonString(members["method"]); err != nil || m != DefaultHandshakeMethod {
		return false
	}
	params, ok := members["params"]
	return ok && isLegacyParams(params)
}

func isLegacyParams(params json.RawMessage) bool {
	m, err := nestedMembers(params, legacyParamsMembers...)
	if err != nil {
		// Ambiguous params are no legacy handshake (which is passed
		// through unread); ParseHandshakeParams refuses them.
		return false
	}
	for _, k := range []string{"supportedMethods", "version", "signedChallenge"} {
		if _, ok := m[k]; ok {
			return false
		}
	}
	for _, k := range []string{"nonce", "audience", "timestamp", "clientInfo", "clientProtocolVersion", "clientCapabilities"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
