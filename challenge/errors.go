package challenge

import (
	"encoding/json"
	"errors"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// Errors. Every error returned by this package wraps one of these, so callers
// map them with errors.Is (or with Code). Messages never contain a proof
// value, a challenge, a nonce or a credential.
var (
	// ErrParse: the body is not valid JSON (-32700).
	ErrParse = errors.New("challenge: parse error")
	// ErrInvalidRequest: valid JSON but not a JSON-RPC 2.0 request object we
	// accept (batch, notification, bad id, extra members, too large) (-32600).
	ErrInvalidRequest = errors.New("challenge: invalid request")
	// ErrMethodNotFound: a JSON-RPC method other than handshake/verify (-32601).
	ErrMethodNotFound = errors.New("challenge: method not found")
	// ErrInvalidParams: params missing, of the wrong type or too long (-32602).
	ErrInvalidParams = errors.New("challenge: invalid params")

	// ErrExpired: the challenge was issued but its lifetime has passed
	// (-32001).
	ErrExpired = errors.New("challenge: challenge expired")
	// ErrBadProof: the signed challenge does not verify: timestamp outside
	// the skew, agent DID unresolvable or without a matching authentication
	// key, signature invalid, challenge or DID not the ones issued (-32002).
	ErrBadProof = errors.New("challenge: invalid proof")
	// ErrReplay: the nonce is unknown or was already consumed (-32003).
	ErrReplay = errors.New("challenge: challenge unknown or already used")
	// ErrUntrustedCredential: the delegation credential did not verify, or
	// was issued to another agent (-32004).
	ErrUntrustedCredential = errors.New("challenge: credential not accepted")

	// ErrStoreUnavailable: the nonce store could not be reached; callers
	// must fail closed (HTTP 503, JSON-RPC -32000).
	ErrStoreUnavailable = errors.New("challenge: nonce store unavailable")
	// ErrStoreFull: the in-memory store holds its maximum number of live
	// challenges, or Redis is out of memory (ErrRedisOutOfMemory). It
	// wraps ErrStoreUnavailable.
	ErrStoreFull = storeFullError{}
	// ErrNonceNotFound: NonceStore.Consume found no live record (absent,
	// expired or already consumed).
	ErrNonceNotFound = errors.New("challenge: nonce not found")
	// ErrNonceExists: NonceStore.Put found a record under the nonce.
	ErrNonceExists = errors.New("challenge: nonce already stored")
)

// ErrRepeatedMember is wrapped, beside ErrInvalidRequest or
// ErrInvalidParams, by the error for a request in which an object the
// edge reads or passes on (the request, params, signedChallenge, a
// credential object, anything nested in them) repeats a member name,
// exactly or in another case under Unicode folding. An upstream decoding
// the forwarded request with another parser could read another value than
// the one checked here. It is the same value as vc.ErrRepeatedMember.
var ErrRepeatedMember = jsonkey.ErrRepeated

type storeFullError struct{}

func (storeFullError) Error() string        { return "challenge: nonce store full" }
func (storeFullError) Unwrap() error        { return ErrStoreUnavailable }
func (storeFullError) Is(target error) bool { return target == ErrStoreFull }

// JSON-RPC error codes. The -3200x codes are ours (docs/protocol/mcpi.md#handshake-errors).
const (
	CodeParseError          = -32700
	CodeInvalidRequest      = -32600
	CodeMethodNotFound      = -32601
	CodeInvalidParams       = -32602
	CodeInternalError       = -32603
	CodeStoreUnavailable    = -32000
	CodeExpired             = -32001
	CodeBadProof            = -32002
	CodeReplay              = -32003
	CodeUntrustedCredential = -32004
)

// errorTable is in precedence order: the first sentinel err wraps wins.
var errorTable = []struct {
	err     error
	code    int
	message string
}{
	{ErrParse, CodeParseError, "Parse error"},
	{ErrInvalidRequest, CodeInvalidRequest, "Invalid Request"},
	{ErrMethodNotFound, CodeMethodNotFound, "Method not found"},
	{ErrInvalidParams, CodeInvalidParams, "Invalid params"},
	{ErrStoreFull, CodeStoreUnavailable, "Challenge store full"},
	{ErrStoreUnavailable, CodeStoreUnavailable, "Challenge store unavailable"},
	{ErrExpired, CodeExpired, "Challenge expired"},
	{ErrReplay, CodeReplay, "Challenge unknown or already used"},
	{ErrNonceNotFound, CodeReplay, "Challenge unknown or already used"},
	{ErrBadProof, CodeBadProof, "Invalid proof"},
	{ErrUntrustedCredential, CodeUntrustedCredential, "Credential not accepted"},
}

// Code returns the JSON-RPC error code for err: -32700, -32600, -32601,
// -32602, -32000 (store unavailable or full), -32001 (expired), -32002 (bad
// proof), -32003 (replay), -32004 (untrusted credential), and -32603 for
// anything else (including nil).
func Code(err error) int {
	code, _ := classify(err)
	return code
}

func classify(err error) (int, string) {
	if err != nil {
		for _, e := range errorTable {
			if errors.Is(err, e.err) {
				return e.code, e.message
			}
		}
	}
	return CodeInternalError, "Internal error"
}

// ErrorResponse builds the JSON-RPC 2.0 error response for err. id is the
// request id (nil or empty becomes null, as JSON-RPC requires when the id is
// unknown). The message is a fixed text per sentinel error: err's own text is never
// sent, so nothing the client presented is echoed.
func ErrorResponse(id json.RawMessage, err error) *Response {
	code, msg := classify(err)
	return &Response{
		JSONRPC: Version,
		ID:      responseID(id),
		Error:   &Error{Code: code, Message: msg},
	}
}

// ResultResponse builds the JSON-RPC 2.0 success response carrying result.
func ResultResponse(id json.RawMessage, result any) *Response {
	return &Response{JSONRPC: Version, ID: responseID(id), Result: result}
}

func responseID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}
