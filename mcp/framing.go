package mcp

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// MCP 2026-07-28 framing over Streamable HTTP: the protocol version travels
// both in the MCP-Protocol-Version header and in every request's
// _meta["io.modelcontextprotocol/protocolVersion"], and a POST mirrors its
// method in Mcp-Method and the tool name, prompt name or resource URI in
// Mcp-Name, so that intermediaries may route on headers. A server that reads
// the body must refuse headers that disagree with it (-32020 HeaderMismatch):
// otherwise a router, rate limiter or log would act on one tool while the
// upstream runs another. Older eras are left exactly as they are.

// Header and _meta names of the 2026-07-28 framing.
const (
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderParamPrefix     = "Mcp-Param-"

	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

	// Version2026 is the first protocol version of the stateless era.
	Version2026 = "2026-07-28"

	// CodeHeaderMismatch is the JSON-RPC error for headers that are
	// missing, malformed or disagree with the body (HTTP 400).
	CodeHeaderMismatch = -32020
)

// Era is the generation of the MCP protocol a request speaks.
type Era uint8

const (
	// Era2025: initialize, sessions, server-initiated requests (every
	// version before 2026-07-28, and requests that name no version).
	Era2025 Era = iota
	// Era2026: stateless requests with framing headers, resultType and
	// input-required results (2026-07-28 and later).
	Era2026
)

// ErrHeaderMismatch wraps every framing refusal (CodeHeaderMismatch).
var ErrHeaderMismatch = errors.New("mcp: framing headers do not match the request")

// FramingError says which framing rule a request broke. Its message names
// the header, never the values (they end up in logs and answers).
type FramingError struct {
	Header string // the header at fault
	Reason string
}

func (e *FramingError) Error() string {
	return "mcp: " + e.Header + ": " + e.Reason
}

func (e *FramingError) Unwrap() error { return ErrHeaderMismatch }

func framingErr(header, reason string) error { return &FramingError{Header: header, Reason: reason} }

// HeaderEra is the era the MCP-Protocol-Version header of h names. It reads
// only the header: once CheckFraming accepted a request, the header and the
// body agree, so responses are shaped by it alone.
func HeaderEra(h http.Header) Era {
	if v := h.Get(HeaderProtocolVersion); isVersion(v) && v >= Version2026 {
		return Era2026
	}
	return Era2025
}

// isVersion reports whether v has the YYYY-MM-DD form of MCP versions, which
// compare in time order as strings.
func isVersion(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if i != 4 && i != 7 && (v[i] < '0' || v[i] > '9') {
			return false
		}
	}
	return true
}

// namedMethods maps the methods whose target is mirrored in Mcp-Name to the
// params member that holds it.
var namedMethods = map[string]string{
	MethodToolsCall:  "name",
	"prompts/get":    "name",
	"resources/read": "uri",
}

// NeedsFraming reports whether CheckFraming has anything to check in a
// request with headers h and body body, without parsing the body: the header
// names the 2026 era (or is malformed), or the body may carry the _meta
// protocol version. A 2025 request without that text costs one header
// lookup and one byte search; one with it (initialize has
// params.protocolVersion) is parsed once more. A _meta name spelt with escapes slips past the
// search; the upstream then sees a _meta version without a matching header,
// which it must refuse itself.
func NeedsFraming(h http.Header, body []byte) bool {
	if v := h.Values(HeaderProtocolVersion); len(v) > 1 || (len(v) == 1 && (!isVersion(v[0]) || v[0] >= Version2026)) {
		return true
	}
	return bytes.Contains(body, []byte("protocolVersion"))
}

// CheckFraming checks the framing of the messages msgs of a POST body
// (batch as ParseMessages says) against its headers h, and returns the
// request's era. Errors wrap ErrHeaderMismatch (see FramingError), except a
// 2026 batch, which the era no longer allows (ErrInvalidMessage).
//
// Rules: MCP-Protocol-Version appears at most once; a request carrying the _meta version needs the header with the same
// value. In the 2026 era the one message is not a batch; a request or
// notification carries exactly one Mcp-Method equal to its method, and a
// tools/call, prompts/get or resources/read exactly one Mcp-Name equal to
// params.name or params.uri, raw or in the "=?base64?...?=" form. Responses
// carry no framing.
func CheckFraming(h http.Header, msgs []Message, batch bool) (Era, error) {
	hv := ""
	switch v := h.Values(HeaderProtocolVersion); {
	case len(v) > 1:
		return Era2025, framingErr(HeaderProtocolVersion, "given more than once")
	case len(v) == 1:
		hv = v[0]
	}
	for _, m := range msgs {
		if !IsRequest(m) {
			continue // the _meta triple is defined for calls only
		}
		mv, err := metaProtocolVersion(m.Params)
		if err != nil {
			return Era2025, err
		}
		switch {
		case len(mv) == 0:
		case hv == "":
			return Era2025, framingErr(HeaderProtocolVersion, "required with a _meta protocol version")
		case string(mv) != hv:
			return Era2025, framingErr(HeaderProtocolVersion, "does not match the _meta protocol version")
		}
	}
	if !isVersion(hv) || hv < Version2026 {
		// A version the edge does not know is the upstream's to refuse
		// (-32022 UnsupportedProtocolVersion): it is not a framing error,
		// and the body alone still decides the policy.
		return Era2025, nil
	}
	if batch {
		return Era2026, &MessageError{Index: -1, Err: ErrInvalidMessage}
	}
	if len(msgs) != 1 || msgs[0].Method == "" {
		return Era2026, nil // a response: nothing is mirrored
	}
	m := msgs[0]
	method, err := single(h, HeaderMethod)
	if err != nil {
		return Era2026, err
	}
	if method != m.Method {
		return Era2026, framingErr(HeaderMethod, "does not match the method of the body")
	}
	member, named := namedMethods[m.Method]
	if !named {
		return Era2026, nil
	}
	raw, err := single(h, HeaderName)
	if err != nil {
		return Era2026, err
	}
	name, ok := DecodeHeaderValue(raw)
	if !ok {
		return Era2026, framingErr(HeaderName, "invalid base64 form")
	}
	body, err := paramString(m.Params, member)
	if err != nil {
		return Era2026, err
	}
	if name != string(body) {
		return Era2026, framingErr(HeaderName, "does not match params."+member+" of the body")
	}
	return Era2026, nil
}

// CarriesMetaVersion reports whether request m names a protocol version in
// params._meta, as every 2026 request must (the TypeScript SDK's server
// refuses one without it). CheckFraming has then held it equal to the
// header. A request with only the header is 2026 to the edge's framing
// checks, but an upstream that reads the era from the body may answer it as
// an older client, so such an answer says nothing about 2026-only members.
func CarriesMetaVersion(m Message) bool {
	v, err := metaProtocolVersion(m.Params)
	return err == nil && len(v) > 0
}

// single returns the one value of header name: absent, empty or repeated
// is refused (routers disagree on which of several values counts).
func single(h http.Header, name string) (string, error) {
	v := h.Values(name)
	switch {
	case len(v) == 0 || (len(v) == 1 && v[0] == ""):
		return "", framingErr(name, "missing")
	case len(v) > 1:
		return "", framingErr(name, "given more than once")
	}
	return v[0], nil
}

// Base64 form of header values (SEP-2243): values that are not plain
// printable ASCII travel as "=?base64?" + standard base64 + "?=".
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// DecodeHeaderValue returns the value a Mcp-Name or Mcp-Param-* header
// carries: the decoded UTF-8 text of the base64 form, else the header as it
// is. ok is false for a base64 form that does not decode to UTF-8.
func DecodeHeaderValue(v string) (string, bool) {
	enc, ok := strings.CutPrefix(v, base64Prefix)
	if !ok {
		return v, true
	}
	if enc, ok = strings.CutSuffix(enc, base64Suffix); !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// EncodeHeaderValue is the form a client sends s in: as it is when it is
// printable ASCII without surrounding blanks and does not look encoded,
// else base64.
func EncodeHeaderValue(s string) string {
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7e
	}
	if plain && !(strings.HasPrefix(s, base64Prefix) && strings.HasSuffix(s, base64Suffix)) {
		return s
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
}

// metaProtocolVersion returns params._meta[MetaProtocolVersion] when it is
// a string (params' own bytes when it holds no escape: only compared, so
// not copied), empty when params, _meta or the member is absent or of
// another type (as the official SDKs read it). Names that fold to "_meta" or to the
// version key without being them are refused: a decoder matching without
// case would read another value than this one.
func metaProtocolVersion(params []byte) ([]byte, error) {
	meta, err := strictMember(params, "_meta")
	if err != nil || meta == nil || meta[0] != '{' {
		return nil, err
	}
	v, err := strictMember(meta, MetaProtocolVersion)
	if err != nil || v == nil {
		return nil, err
	}
	s, ok := stringBytes(v, 0, len(v))
	if !ok {
		return nil, nil
	}
	return s, nil
}

// paramString returns the string params[member] that a framing header
// mirrors (as metaProtocolVersion, bytes that may be params' own); anything else (absent, not a string, repeated in any letter
// case) is refused as a mismatch, since the header cannot equal it.
func paramString(params []byte, member string) ([]byte, error) {
	v, err := strictMember(params, member)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, framingErr(HeaderName, "params."+member+" is missing")
	}
	s, ok := stringBytes(v, 0, len(v))
	if !ok {
		return nil, framingErr(HeaderName, "params."+member+" is not a string")
	}
	return s, nil
}

// strictMember returns the value of member name of the object obj (nil when
// obj is not an object or has no such member). A repeat of name, or another
// name that folds to it, is ErrInvalidParams.
func strictMember(obj []byte, name string) ([]byte, error) {
	obj = trimSpace(obj)
	if len(obj) == 0 || obj[0] != '{' {
		return nil, nil
	}
	var val []byte
	_, err := eachMember(obj, 0, 1, func(m member) error {
		if string(m.key) == name {
			if val != nil {
				return &MessageError{Index: -1, Member: name, Err: ErrInvalidParams}
			}
			val = obj[m.start:m.end]
			return nil
		}
		if foldsTo(m.key, name) {
			return &MessageError{Index: -1, Member: name, Err: ErrInvalidParams}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return val, nil
}

// foldsTo reports whether key is a letter-case variant of name, as lenient
// decoders match member names (see jsonkey). Names of very different
// lengths cannot fold together, and are not folded.
func foldsTo(key []byte, name string) bool {
	if len(key) > 3*len(name) || 3*len(key) < len(name) {
		return false
	}
	return jsonkey.FoldsTo(key, name)
}
