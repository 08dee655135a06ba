package mcp

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// ActionMode is what the edge does with handshake actions in tool results
// (docs/protocol/mcpi.md#handshake-actions).
type ActionMode uint8

const (
	// ActionsOff leaves tool results alone.
	ActionsOff ActionMode = iota
	// ActionsObserve reports issues but changes nothing except adding
	// context_did to a valid authUrl.
	ActionsObserve
	// ActionsEnforce also replaces a result with an invalid action by a
	// tool error.
	ActionsEnforce
)

// String returns "off", "observe" or "enforce".
func (m ActionMode) String() string {
	switch m {
	case ActionsObserve:
		return "observe"
	case ActionsEnforce:
		return "enforce"
	default:
		return "off"
	}
}

// ParseActionMode reads "off", "observe" or "enforce", for config.
func ParseActionMode(s string) (ActionMode, error) {
	switch s {
	case "off":
		return ActionsOff, nil
	case "observe":
		return ActionsObserve, nil
	case "enforce":
		return ActionsEnforce, nil
	}
	return ActionsOff, fmt.Errorf("mcp: unknown handshake action mode %q (want off, observe or enforce)", s)
}

// Handshake action types (docs/protocol/mcpi.md#handshake-actions).
const (
	ActionSignatureRequest    = "signature_request"
	ActionTransactionProposal = "transaction_proposal"
	ActionAuthRequired        = "auth_required"
)

// Issue codes: a short, bounded set, usable as metric label values.
const (
	// IssueMalformed: a required field is missing or of the wrong type, or
	// handshakeAction is not an object.
	IssueMalformed = "malformed"
	// IssueUnknownAction: _action is not one of the three known types.
	IssueUnknownAction = "unknown_action"
	// IssueAmbiguous: a member on the path to the action, or of the action,
	// is given twice; clients may disagree on which one counts.
	IssueAmbiguous = "ambiguous"
	// IssueInsecureURL: authUrl is not an absolute https URL, has
	// userinfo, or has characters browsers reinterpret.
	IssueInsecureURL = "insecure_url"
	// IssueForeignHost: authUrl is not on the tool endpoint's registrable
	// domain nor an allowed host.
	IssueForeignHost = "foreign_host"
)

// ActionIssue is one problem found in a handshake action.
type ActionIssue struct {
	// Action is the _action value when it is a string, else "".
	Action string
	// Code is one of the Issue constants.
	Code string
	// Field names the offending member, e.g. "authUrl" or
	// "structuredContent._meta".
	Field string
	// Detail is a human explanation. It may name the authUrl host, never
	// the full URL (which may carry tokens).
	Detail string
}

func (i ActionIssue) String() string {
	s := i.Code
	if i.Field != "" {
		s += " (" + i.Field + ")"
	}
	if i.Detail != "" {
		s += ": " + i.Detail
	}
	return s
}

// ActionOptions parameterise CheckActions.
type ActionOptions struct {
	// ToolEndpointHost is the host of the MCP endpoint that returned the
	// result: a host, host:port, or URL. An authUrl on the same registrable
	// domain (public suffix + 1, so any subdomain of example.com for
	// mcp.example.com) passes. Empty: only AllowedHosts pass.
	ToolEndpointHost string
	// AllowedHosts are further authUrl hosts allowed: exact host names, or
	// "*.example.com" for any subdomain of example.com.
	AllowedHosts []string
	// UserDID, when set (the user DID of a verified delegation), is added
	// to a valid authUrl as context_did, replacing any context_did already
	// there: the tool must not choose whose account gets linked.
	UserDID string
	// Era of the request: a result replaced in the 2026 era carries
	// resultType.
	Era Era
}

// CheckActions validates the handshake action of an MCP tool result (the
// JSON-RPC "result" object), at structuredContent._meta.handshakeAction
// as the edge expects it, and adds context_did to a valid auth_required authUrl when
// opts.UserDID is set. It returns the possibly rewritten result (the input
// itself when unchanged; only the authUrl string is replaced) and the issues
// found; the caller chooses what to do with them (see EnforceActions).
//
// A result with no action (no structuredContent, _meta or handshakeAction
// object; a null handshakeAction; a result that is not an object) is
// returned unchanged with no issues. Invalid JSON is ErrParse, nesting
// beyond MaxDepth ErrTooDeep.
//
// Checks: signature_request needs objects domain, types and message and a
// string primaryType naming a type in types; transaction_proposal needs
// chainId (positive integer, or decimal or 0x-hex string), to (0x + 40 hex
// digits), data (0x + hex bytes) and optionally value (non-negative integer,
// decimal or 0x-hex string); auth_required needs a string provider and an
// https authUrl on the tool's domain or an allowed host. meta, when present,
// must be an object; callbackToolName a string. null counts as absent for
// optional members.
func CheckActions(result json.RawMessage, opts ActionOptions) (json.RawMessage, []ActionIssue, error) {
	if !jsonscan.Valid(result) {
		return nil, nil, ErrParse
	}
	out, issues, _, err := checkActions(result, opts, 0)
	return out, issues, err
}

// EnforceActions applies mode to result: off returns it untouched, observe
// returns CheckActions' output, and enforce replaces a result with issues by
// a tool error that names them (so the model sees why), as
// RejectedActionResult builds it. The issues are returned for logging in
// both observe and enforce modes.
func EnforceActions(result json.RawMessage, opts ActionOptions, mode ActionMode) (json.RawMessage, []ActionIssue, error) {
	if mode == ActionsOff {
		return result, nil, nil
	}
	if !jsonscan.Valid(result) {
		return nil, nil, ErrParse
	}
	out, issues, _, err := enforceActions(result, opts, mode, 0)
	return out, issues, err
}

// RejectedActionResult is the tool result that replaces one whose handshake
// action failed the checks: isError, a text naming the issues, and
// structuredContent {error: "handshake_action_rejected", issues: [{code,
// field}]}.
func RejectedActionResult(issues []ActionIssue) json.RawMessage {
	return rejectedActionResult(Era2025, issues)
}

// rejectedActionResult is RejectedActionResult in era (resultType in 2026).
func rejectedActionResult(era Era, issues []ActionIssue) json.RawMessage {
	parts := make([]string, len(issues))
	list := make([]map[string]string, len(issues))
	for k, is := range issues {
		parts[k] = is.String()
		list[k] = map[string]string{"code": is.Code, "field": is.Field}
	}
	text := "The MCP-I edge withheld this tool result: its handshake action failed validation: " + strings.Join(parts, "; ")
	return toolErrorObject(era, text, map[string]any{"error": "handshake_action_rejected", "issues": list}, nil)
}

func enforceActions(result []byte, opts ActionOptions, mode ActionMode, depth int) ([]byte, []ActionIssue, bool, error) {
	if mode == ActionsOff {
		return result, nil, false, nil
	}
	out, issues, changed, err := checkActions(result, opts, depth)
	if err != nil {
		return nil, nil, false, err
	}
	// The URL-mode elicitations of a 2026 input-required result.
	out, elicit, echanged, err := checkInputRequests(out, opts, depth)
	if err != nil {
		return nil, nil, false, err
	}
	issues, changed = append(issues, elicit...), changed || echanged
	if mode == ActionsEnforce && len(issues) > 0 {
		return rejectedActionResult(opts.Era, issues), issues, true, nil
	}
	return out, issues, changed, nil
}

// actionPath is where handshake actions live in a tool result.
var actionPath = [...]string{"structuredContent", "_meta", "handshakeAction"}

// checkActions is CheckActions on valid JSON; depth is the nesting level of
// the container holding result. changed reports a rewritten authUrl.
func checkActions(result []byte, opts ActionOptions, depth int) (out []byte, issues []ActionIssue, changed bool, err error) {
	start := skipSpace(result, 0)
	if start == len(result) || result[start] != '{' {
		return result, nil, false, nil
	}
	d := depth + 1
	for k, name := range actionPath {
		f, dup, _, err := findStrict(result, start, d, name)
		if err != nil {
			return nil, nil, false, err
		}
		if dup != "" {
			field := strings.Join(actionPath[:k+1], ".")
			return result, []ActionIssue{{Code: IssueAmbiguous, Field: field, Detail: "member given twice"}}, false, nil
		}
		vs := f[0][0]
		if vs < 0 || result[vs] == 'n' {
			return result, nil, false, nil
		}
		if result[vs] != '{' {
			if name != "handshakeAction" {
				// Not an object: no handshakeAction can be read from it.
				return result, nil, false, nil
			}
			return result, []ActionIssue{{Code: IssueMalformed, Field: strings.Join(actionPath[:], "."), Detail: "not an object"}}, false, nil
		}
		start, d = vs, d+1
	}
	return checkAction(result, start, d, opts)
}

// The members of an action, in the order findMembers reports them.
const (
	fAction = iota
	fProvider
	fAuthURL
	fDomain
	fTypes
	fPrimaryType
	fMessage
	fMeta
	fCallback
	fChainID
	fTo
	fData
	fValue
)

var actionMembers = []string{"_action", "provider", "authUrl", "domain", "types", "primaryType",
	"message", "meta", "callbackToolName", "chainId", "to", "data", "value"}

// checkAction checks the action object at d[start]; depth is its nesting
// level.
func checkAction(d []byte, start, depth int, opts ActionOptions) ([]byte, []ActionIssue, bool, error) {
	f, dup, _, err := findStrict(d, start, depth, actionMembers...)
	if err != nil {
		return nil, nil, false, err
	}
	action, ok := stringValue(d, f[fAction][0], f[fAction][1])
	if dup != "" {
		return d, []ActionIssue{{Action: action, Code: IssueAmbiguous, Field: dup, Detail: "member given twice"}}, false, nil
	}
	if !ok {
		return d, []ActionIssue{{Code: IssueMalformed, Field: "_action", Detail: "missing or not a string"}}, false, nil
	}
	var issues []ActionIssue
	bad := func(field, detail string) {
		issues = append(issues, ActionIssue{Action: action, Code: IssueMalformed, Field: field, Detail: detail})
	}
	present := func(k int) bool { return f[k][0] >= 0 && d[f[k][0]] != 'n' }
	kind := func(k int) byte {
		if f[k][0] < 0 {
			return 0
		}
		return d[f[k][0]]
	}
	str := func(k int) (string, bool) { return stringValue(d, f[k][0], f[k][1]) }
	requireObject := func(k int) {
		if kind(k) != '{' {
			bad(actionMembers[k], "missing or not an object")
		}
	}
	optional := func(k int, want byte, what string) {
		if present(k) && kind(k) != want {
			bad(actionMembers[k], "not "+what)
		}
	}

	switch action {
	case ActionSignatureRequest:
		requireObject(fDomain)
		requireObject(fTypes)
		requireObject(fMessage)
		optional(fMeta, '{', "an object")
		optional(fCallback, '"', "a string")
		pt, ok := str(fPrimaryType)
		switch {
		case !ok || pt == "":
			bad("primaryType", "missing or not a string")
		case kind(fTypes) == '{':
			// EIP-712 signing fails when primaryType has no definition:
			// the wallet would show an error, or worse, something else.
			tf, _, _, err := findMembers(d, f[fTypes][0], depth+1, pt)
			if err != nil {
				return nil, nil, false, err
			}
			if tf[0][0] < 0 {
				bad("primaryType", "not defined in types")
			}
		}
	case ActionTransactionProposal:
		if !chainIDValid(d, f[fChainID]) {
			bad("chainId", "missing, or not a positive integer or integer string")
		}
		if s, ok := str(fTo); !ok || !isHexAddress(s) {
			bad("to", "missing or not a 0x-prefixed 20-byte hex address")
		}
		if s, ok := str(fData); !ok || !isHexData(s) {
			bad("data", "missing or not 0x-prefixed hex bytes")
		}
		if present(fValue) && !amountValid(d, f[fValue]) {
			bad("value", "not a non-negative integer or integer string")
		}
		optional(fMeta, '{', "an object")
	case ActionAuthRequired:
		if p, ok := str(fProvider); !ok || p == "" {
			bad("provider", "missing or not a string")
		}
		optional(fMeta, '{', "an object")
		raw, ok := str(fAuthURL)
		if !ok {
			bad("authUrl", "missing or not a string")
			break
		}
		if is := opts.checkAuthURL(raw); is != nil {
			is.Action = action
			issues = append(issues, *is)
			break
		}
		if len(issues) > 0 || opts.UserDID == "" {
			break
		}
		enc, err := marshal(setQuery(raw, [][2]string{{"context_did", opts.UserDID}}))
		if err != nil {
			return nil, nil, false, err
		}
		vs, ve := f[fAuthURL][0], f[fAuthURL][1]
		out := make([]byte, 0, len(d)-(ve-vs)+len(enc))
		out = append(out, d[:vs]...)
		out = append(out, enc...)
		out = append(out, d[ve:]...)
		return out, nil, true, nil
	default:
		return d, []ActionIssue{{Action: action, Code: IssueUnknownAction, Field: "_action", Detail: "unknown action type"}}, false, nil
	}
	return d, issues, false, nil
}

// chainIDValid: a positive integer number, or a string holding a positive
// decimal or 0x-hex integer.
func chainIDValid(d []byte, at [2]int) bool {
	if at[0] < 0 {
		return false
	}
	v := d[at[0]:at[1]]
	if v[0] == '"' {
		s, ok := stringValue(d, at[0], at[1])
		return ok && isIntString(s) && !isZero(s)
	}
	return isDigits(string(v)) && !isZero(string(v))
}

// isZero: an integer string (see isIntString) whose value is 0.
func isZero(s string) bool {
	return strings.Trim(strings.TrimPrefix(s, "0x"), "0") == ""
}

// amountValid: a non-negative integer number, or a decimal or 0x-hex
// integer string.
func amountValid(d []byte, at [2]int) bool {
	v := d[at[0]:at[1]]
	if v[0] == '"' {
		s, ok := stringValue(d, at[0], at[1])
		return ok && isIntString(s)
	}
	return isDigits(string(v))
}

func isIntString(s string) bool {
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		return h != "" && isHex(h)
	}
	return isDigits(s)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func isHexAddress(s string) bool {
	h, ok := strings.CutPrefix(s, "0x")
	return ok && len(h) == 40 && isHex(h)
}

func isHexData(s string) bool {
	h, ok := strings.CutPrefix(s, "0x")
	return ok && len(h)%2 == 0 && isHex(h)
}

// checkAuthURL returns the issue with raw as an authUrl, or nil.
func (o *ActionOptions) checkAuthURL(raw string) *ActionIssue {
	insecure := func(detail string) *ActionIssue {
		return &ActionIssue{Code: IssueInsecureURL, Field: "authUrl", Detail: detail}
	}
	// Browsers read "\" as "/" and drop tabs and newlines, so the host they
	// open could differ from the one net/url sees.
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c == 0x7f || c == '\\' {
			return insecure("contains whitespace, control characters or backslashes")
		}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return insecure("not a URL")
	case u.Scheme != "https":
		return insecure("not an https URL")
	case u.Opaque != "" || u.Host == "":
		return insecure("not an absolute URL with a host")
	case u.User != nil:
		return insecure("has userinfo")
	}
	host, ok := normalizeHost(u.Hostname())
	if !ok {
		return insecure("invalid host")
	}
	if !o.hostAllowed(host) {
		return &ActionIssue{Code: IssueForeignHost, Field: "authUrl",
			Detail: fmt.Sprintf("host %q is not on the tool endpoint's domain", host)}
	}
	return nil
}

// hostAllowed: host (normalized) is an allowed host, the tool's host, or on
// the tool host's registrable domain.
func (o *ActionOptions) hostAllowed(host string) bool {
	for _, e := range o.AllowedHosts {
		if suffix, ok := strings.CutPrefix(e, "*."); ok {
			if s, ok := normalizeHost(suffix); ok && strings.HasSuffix(host, "."+s) {
				return true
			}
		} else if h, ok := normalizeHost(e); ok && h == host {
			return true
		}
	}
	tool, ok := normalizeHost(endpointHostname(o.ToolEndpointHost))
	if !ok {
		return false
	}
	if host == tool {
		return true
	}
	if net.ParseIP(host) != nil || net.ParseIP(tool) != nil {
		return false
	}
	// The registrable domain (eTLD+1, with the private suffixes of the
	// Public Suffix List, so foo.workers.dev and bar.workers.dev differ).
	a, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return false
	}
	b, err := publicsuffix.EffectiveTLDPlusOne(tool)
	return err == nil && a == b
}

// endpointHostname extracts the host name from a host, host:port, [v6]:port
// or URL.
func endpointHostname(s string) string {
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil {
			return u.Hostname()
		}
		return ""
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
}

// normalizeHost lower-cases a host name, drops a final dot, converts an
// internationalized name to its A-label form and canonicalizes IP literals,
// so that equal hosts compare equal.
func normalizeHost(h string) (string, bool) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return "", false
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), true
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 0x80:
			ascii = false
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return "", false
		}
	}
	if ascii {
		return h, true
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil || a == "" {
		return "", false
	}
	return strings.ToLower(a), true
}
