package challenge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Version is the JSON-RPC version every message carries.
const Version = "2.0"

// Default method names (MCPI-WIRE §5 [ours]); see WithMethods.
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

// ParseHandshakeParams parses and checks handshake params. Errors wrap
// ErrInvalidParams.
func ParseHandshakeParams(raw json.RawMessage) (*HandshakeParams, error) {
	m, err := nestedMembers(raw, handshakeMembers...)
	if err != nil {
		return nil, paramsError(err, "params")
	}
	var p HandshakeParams
	if p.AgentDID, err = requiredString(m, "agentDid"); err != nil {
		return nil, err
	}
	if v, ok := m["supportedMethods"]; ok {
		if p.SupportedMethods, err = jsonStringArray(v); err != nil {
			return nil, fmt.Errorf("%w: supportedMethods must be an array of strings", ErrInvalidParams)
		}
	}
	if v, ok := m["version"]; ok {
		if p.Version, err = jsonString(v); err != nil {
			return nil, fmt.Errorf("%w: version must be a string", ErrInvalidParams)
		}
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *HandshakeParams) validate() error {
	if err := validateDID(p.AgentDID); err != nil {
		return err
	}
	if len(p.SupportedMethods) > maxMethods {
		return fmt.Errorf("%w: too many supportedMethods", ErrInvalidParams)
	}
	for _, s := range p.SupportedMethods {
		if s == "" || len(s) > maxMethodNameLen {
			return fmt.Errorf("%w: bad supportedMethods entry", ErrInvalidParams)
		}
	}
	if len(p.Version) > maxVersionLen {
		return fmt.Errorf("%w: version too long", ErrInvalidParams)
	}
	return nil
}

// ParseVerifyParams parses and checks verify params. Errors wrap
// ErrInvalidParams.
func ParseVerifyParams(raw json.RawMessage) (*VerifyParams, error) {
	m, err := nestedMembers(raw, verifyMembers...)
	if err != nil {
		return nil, paramsError(err, "params")
	}
	scRaw, ok := m["signedChallenge"]
	if !ok {
		return nil, fmt.Errorf("%w: signedChallenge required", ErrInvalidParams)
	}
	var p VerifyParams
	if err := p.SignedChallenge.parse(scRaw); err != nil {
		return nil, err
	}
	cred, ok := m["credential"]
	if !ok {
		return nil, fmt.Errorf("%w: credential required", ErrInvalidParams)
	}
	p.Credential = append(json.RawMessage(nil), cred...)
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *VerifyParams) validate() error {
	if err := p.SignedChallenge.validate(); err != nil {
		return err
	}
	if _, err := p.credentialBytes(); err != nil {
		return err
	}
	return nil
}

// credentialBytes returns what to hand the credential verifier: the content
// of a JSON string (a VC-JWT), or the object's bytes as presented.
func (p *VerifyParams) credentialBytes() ([]byte, error) {
	c := bytes.TrimSpace(p.Credential)
	switch {
	case isJSONString(c):
		s, err := jsonString(c)
		if err != nil || s == "" {
			return nil, fmt.Errorf("%w: credential must be a non-empty string or an object", ErrInvalidParams)
		}
		return []byte(s), nil
	case len(c) > 0 && c[0] == '{' && json.Valid(c):
		return c, nil
	default:
		return nil, fmt.Errorf("%w: credential must be a non-empty string or an object", ErrInvalidParams)
	}
}

// UnmarshalJSON parses a signedChallenge object strictly (see
// ParseVerifyParams) and keeps unknown members for the signing input.
func (sc *SignedChallenge) UnmarshalJSON(data []byte) error {
	var n SignedChallenge
	if err := n.parse(data); err != nil {
		return err
	}
	if err := n.validate(); err != nil {
		return err
	}
	*sc = n
	return nil
}

// MarshalJSON writes the five members (proofValue only when set) and the
// unknown members that were received.
func (sc SignedChallenge) MarshalJSON() ([]byte, error) {
	m, err := sc.members()
	if err != nil {
		return nil, err
	}
	if sc.ProofValue != "" {
		pv, _ := json.Marshal(sc.ProofValue)
		m["proofValue"] = pv
	}
	return json.Marshal(m)
}

// SigningInput returns the bytes the proof signs: JCS (RFC 8785) of the
// signedChallenge object without proofValue, including any unknown members
// that were received.
func (sc *SignedChallenge) SigningInput() ([]byte, error) {
	m, err := sc.members()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("%w: signedChallenge cannot be canonicalized", ErrInvalidParams)
	}
	return out, nil
}

// members returns the object without proofValue. The named members always
// come from the struct fields, so what is signed is what is checked.
func (sc *SignedChallenge) members() (map[string]json.RawMessage, error) {
	if len(sc.Timestamp) > 0 && !json.Valid(sc.Timestamp) {
		return nil, fmt.Errorf("%w: timestamp is not JSON", ErrInvalidParams)
	}
	m := make(map[string]json.RawMessage, len(sc.extra)+4)
	for k, v := range sc.extra {
		m[k] = v
	}
	for k, v := range map[string]string{"challenge": sc.Challenge, "nonce": sc.Nonce, "agentDid": sc.AgentDID} {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	ts := json.RawMessage(sc.Timestamp)
	if len(ts) == 0 {
		ts = json.RawMessage("null")
	}
	m["timestamp"] = ts
	return m, nil
}

func (sc *SignedChallenge) parse(raw []byte) error {
	m, err := nestedMembers(raw, signedChallengeMembers...)
	if err != nil {
		return paramsError(err, "signedChallenge")
	}
	if sc.Challenge, err = requiredString(m, "challenge"); err != nil {
		return err
	}
	if sc.Nonce, err = requiredString(m, "nonce"); err != nil {
		return err
	}
	if sc.AgentDID, err = requiredString(m, "agentDid"); err != nil {
		return err
	}
	if sc.ProofValue, err = requiredString(m, "proofValue"); err != nil {
		return err
	}
	ts, ok := m["timestamp"]
	if !ok {
		return fmt.Errorf("%w: timestamp required", ErrInvalidParams)
	}
	sc.Timestamp = Timestamp(bytes.TrimSpace(ts))
	sc.extra = nil
	for k, v := range m {
		switch k {
		case "challenge", "nonce", "agentDid", "proofValue", "timestamp":
		default:
			if sc.extra == nil {
				sc.extra = make(map[string]json.RawMessage)
			}
			sc.extra[k] = v
		}
	}
	return nil
}

func (sc *SignedChallenge) validate() error {
	if err := validateToken(sc.Challenge, "challenge"); err != nil {
		return err
	}
	if err := validateToken(sc.Nonce, "nonce"); err != nil {
		return err
	}
	if err := validateDID(sc.AgentDID); err != nil {
		return err
	}
	if sc.ProofValue == "" || len(sc.ProofValue) > maxProofValueLen {
		return fmt.Errorf("%w: bad proofValue", ErrInvalidParams)
	}
	if _, err := sc.Timestamp.Time(); err != nil {
		return err
	}
	return nil
}

// Timestamp is the signedChallenge timestamp, kept in its JSON form (the
// signature covers it). Accepted forms: an RFC 3339 string
// ("2025-06-15T18:30:45Z", fractional seconds and offsets allowed), or a
// JSON integer of unix time: milliseconds when >= 1e11 (the KYA-OS
// runtimes), else seconds (the legacy KYA handshake).
type Timestamp json.RawMessage

// TimestampRFC3339 returns t as an RFC 3339 string timestamp (UTC, seconds).
func TimestampRFC3339(t time.Time) Timestamp {
	b, _ := json.Marshal(t.UTC().Format(time.RFC3339))
	return Timestamp(b)
}

// TimestampUnixMilli returns t as a number of unix milliseconds.
func TimestampUnixMilli(t time.Time) Timestamp {
	return Timestamp(strconv.FormatInt(t.UnixMilli(), 10))
}

// TimestampUnix returns t as a number of unix seconds.
func TimestampUnix(t time.Time) Timestamp {
	return Timestamp(strconv.FormatInt(t.Unix(), 10))
}

// MarshalJSON writes the timestamp as held (null when empty).
func (t Timestamp) MarshalJSON() ([]byte, error) {
	if len(t) == 0 {
		return []byte("null"), nil
	}
	return []byte(t), nil
}

// UnmarshalJSON keeps the JSON value as received.
func (t *Timestamp) UnmarshalJSON(data []byte) error {
	*t = append(Timestamp(nil), bytes.TrimSpace(data)...)
	return nil
}

// Time decodes the timestamp. Errors wrap ErrInvalidParams.
func (t Timestamp) Time() (time.Time, error) {
	b := []byte(t)
	if len(b) == 0 || len(b) > maxTimestampLen {
		return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
	}
	if b[0] == '"' {
		s, err := jsonString(b)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
		}
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: timestamp is not RFC 3339", ErrInvalidParams)
		}
		return tm, nil
	}
	if len(b) > maxNumericTSDigit {
		return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return time.Time{}, fmt.Errorf("%w: timestamp must be an RFC 3339 string or an unsigned integer", ErrInvalidParams)
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
	}
	if n >= 1e11 {
		return time.UnixMilli(n), nil
	}
	return time.Unix(n, 0), nil
}

// validateDID is a syntax check only ("did:<method>:<id>", no fragment,
// query, whitespace or control characters); the resolver does the rest.
func validateDID(s string) error {
	if len(s) > maxDIDLen || !strings.HasPrefix(s, "did:") {
		return fmt.Errorf("%w: agentDid must be a DID", ErrInvalidParams)
	}
	rest := s[len("did:"):]
	i := strings.IndexByte(rest, ':')
	if i <= 0 || i == len(rest)-1 {
		return fmt.Errorf("%w: agentDid must be a DID", ErrInvalidParams)
	}
	for _, c := range rest[:i] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("%w: agentDid must be a DID", ErrInvalidParams)
		}
	}
	for j := 0; j < len(rest); j++ {
		c := rest[j]
		if c <= 0x20 || c >= 0x7f || c == '#' || c == '?' || c == '/' {
			return fmt.Errorf("%w: agentDid must be a DID without fragment or path", ErrInvalidParams)
		}
	}
	return nil
}

// validateToken: challenge and nonce are 1-512 printable ASCII characters
// without spaces (ours are base64url; a proxied upstream's may be hex).
func validateToken(s, name string) error {
	if s == "" || len(s) > maxTokenLen {
		return fmt.Errorf("%w: bad %s", ErrInvalidParams, name)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return fmt.Errorf("%w: bad %s", ErrInvalidParams, name)
		}
	}
	return nil
}

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
