package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// textContent is an MCP TextContent block.
type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolResult is an MCP CallToolResult as the edge writes it; the field order
// is the wire order.
type toolResult struct {
	// ResultType is "complete" in the 2026 era, where every result names
	// its type; absent before.
	ResultType        string        `json:"resultType,omitempty"`
	Content           []textContent `json:"content"`
	IsError           bool          `json:"isError"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	Meta              any           `json:"_meta,omitempty"`
}

type rpcResult struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
}

type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	} `json:"error"`
}

// marshal encodes v without HTML escaping: URLs in results stay readable
// ("&", not "\u0026"), which is still valid JSON.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// responseID returns id if it is a valid JSON-RPC id (string, number or
// null), else null: an answer must always be valid JSON.
func responseID(id json.RawMessage) json.RawMessage {
	id = trimSpace(id)
	if len(id) > 0 && jsonscan.Valid(id) {
		switch c := id[0]; {
		case c == '"', c == '-', c >= '0' && c <= '9', c == 'n':
			return id
		}
	}
	return json.RawMessage("null")
}

// toolErrorObject returns a CallToolResult with isError set, text as its only
// content and the optional structured content. Structured content that does
// not encode is dropped rather than failing the answer.
func toolErrorObject(era Era, text string, structured any, meta any) json.RawMessage {
	r := toolResult{ResultType: resultTypeOf(era), Content: []textContent{{Type: "text", Text: text}}, IsError: true, StructuredContent: structured, Meta: meta}
	if b, err := marshal(r); err == nil {
		return b
	}
	r.StructuredContent, r.Meta = nil, nil
	b, _ := marshal(r) // strings and bools always encode
	return b
}

func resultResponse(id json.RawMessage, result json.RawMessage) []byte {
	b, _ := marshal(rpcResult{JSONRPC: "2.0", ID: responseID(id), Result: result}) // all parts are valid JSON
	return b
}

// ToolErrorResult returns a JSON-RPC response to request id whose result is a
// tool error: {"isError": true, "content": [{"type": "text", "text": text}],
// "structuredContent": structured}. Tool errors, unlike JSON-RPC errors, are
// shown to the model, which can then react (MCP spec, CallToolResult). A nil
// structured map is omitted; an id that is not a valid JSON-RPC id becomes
// null.
func ToolErrorResult(id json.RawMessage, text string, structured map[string]any) []byte {
	return ToolErrorResultFor(Era2025, id, text, structured)
}

// ToolErrorResultFor is ToolErrorResult for a request of era: in the 2026
// era the result carries resultType "complete", which 2026 clients require
// of every result.
func ToolErrorResultFor(era Era, id json.RawMessage, text string, structured map[string]any) []byte {
	var sc any
	if structured != nil {
		sc = structured
	}
	return resultResponse(id, toolErrorObject(era, text, sc, nil))
}

// Result types of the 2026 era.
const (
	ResultTypeComplete      = "complete"
	ResultTypeInputRequired = "input_required"
)

// resultTypeOf is the resultType of a complete result in era ("" before
// 2026, omitted).
func resultTypeOf(era Era) string {
	if era >= Era2026 {
		return ResultTypeComplete
	}
	return ""
}

// ErrorResponse returns a JSON-RPC error response, e.g. for ErrorCode(err)
// after ParseMessages failed (then id is nil and becomes null).
func ErrorResponse(id json.RawMessage, code int, message string) []byte {
	var r rpcError
	r.JSONRPC, r.ID = "2.0", responseID(id)
	r.Error.Code, r.Error.Message = code, message
	b, _ := marshal(r)
	return b
}

// NeedsAuthorization describes a tools/call refused for lack of scopes, for
// NeedsAuthorizationResult.
type NeedsAuthorization struct {
	// Tool is the called tool's name.
	Tool string
	// Missing are the scopes consent must grant.
	Missing []string
	// ConsentURL is the consent page (absolute http or https URL) to which
	// the request's parameters are added; "" (or an invalid URL) gives a
	// plain tool error.
	ConsentURL string
	// AgentDID is the calling agent; sent as agent_did.
	AgentDID string
	// ResumeToken, optional, lets the consent flow resume the call; sent as
	// resume_token and returned as _meta.resumeToken.
	ResumeToken string
	// SessionID and ProjectID, optional, are sent as session_id and
	// project_id (a KYA-OS consent page requires both).
	SessionID string
	ProjectID string
	// ExpiresAt, optional, is returned as _meta.expiresAt (Unix ms).
	ExpiresAt time.Time
	// Era of the refused request: the 2026 era gets resultType.
	Era Era
}

// needsAuthMeta is MCP-I's needs_authorization result _meta, in the order and
// with the names of @kya-os/mcp-i-cloudflare (docs/protocol/mcpi.md#tool-policy-answers).
type needsAuthMeta struct {
	Error            string   `json:"error"`
	Message          string   `json:"message"`
	AuthorizationURL string   `json:"authorizationUrl"`
	ResumeToken      string   `json:"resumeToken,omitempty"`
	ExpiresAt        int64    `json:"expiresAt,omitempty"`
	Scopes           []string `json:"scopes"`
	ErrorType        string   `json:"errorType"`
	ToolName         string   `json:"toolName"`
	RequiredScopes   []string `json:"requiredScopes"`
	ConsentURL       string   `json:"consentUrl"`
}

type authRequiredMeta struct {
	DisplayName string   `json:"displayName"`
	Description string   `json:"description"`
	Scopes      []string `json:"scopes"`
	ToolName    string   `json:"toolName"`
}

type authRequiredAction struct {
	Action   string           `json:"_action"`
	Provider string           `json:"provider"`
	AuthURL  string           `json:"authUrl"`
	Meta     authRequiredMeta `json:"meta"`
}

type handshakeStructured struct {
	Meta struct {
		HandshakeAction authRequiredAction `json:"handshakeAction"`
	} `json:"_meta"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

// NeedsAuthorizationResult returns the JSON-RPC response (HTTP 200) to a
// tools/call whose credential lacks the tool's scopes (docs/protocol/mcpi.md#tool-policy-answers). With a
// consent URL it carries both forms agents understand:
//   - structuredContent._meta.handshakeAction, an auth_required action with
//     provider "mcp-i", plus status "handshake_required" and
//     message;
//   - MCP-I's needs_authorization _meta, as @kya-os/mcp-i-cloudflare writes it: error,
//     message, authorizationUrl, resumeToken, expiresAt, scopes, errorType
//     "authorization_required", toolName, requiredScopes, consentUrl.
//
// The consent URL gets tool, scopes (comma-joined, as KYA's buildConsentUrl
// does and its consent page splits), session_id, agent_did, project_id and
// resume_token, replacing parameters of those names already in it. Without
// a usable consent URL the result is a plain tool error naming the missing
// scopes, with structuredContent {error: "insufficient_scope", toolName,
// requiredScopes}.
func NeedsAuthorizationResult(id json.RawMessage, n NeedsAuthorization) []byte {
	scopes := n.Missing
	if scopes == nil {
		scopes = []string{}
	}
	list := strings.Join(scopes, ", ")
	authURL, ok := consentURL(n)
	if !ok {
		text := fmt.Sprintf("Access to tool %q requires scope(s) not granted to this agent: %s.", n.Tool, list)
		return ToolErrorResultFor(n.Era, id, text, map[string]any{
			"error":          "insufficient_scope",
			"toolName":       n.Tool,
			"requiredScopes": scopes,
		})
	}
	msg := fmt.Sprintf("Tool %q needs authorization for scope(s) %s. Ask the user to approve access at %s", n.Tool, list, authURL)

	var sc handshakeStructured
	sc.Meta.HandshakeAction = authRequiredAction{
		Action:   "auth_required",
		Provider: "mcp-i",
		AuthURL:  authURL,
		Meta: authRequiredMeta{
			DisplayName: "MCP-I delegation",
			Description: fmt.Sprintf("Allow the agent to use tool %q with scope(s) %s", n.Tool, list),
			Scopes:      scopes,
			ToolName:    n.Tool,
		},
	}
	sc.Status = "handshake_required"
	sc.Message = msg

	return resultResponse(id, toolErrorObject(n.Era, msg, sc, authMeta(n, msg, authURL, scopes)))
}

// authMeta is the needs_authorization _meta of a prompt for n.
func authMeta(n NeedsAuthorization, msg, authURL string, scopes []string) needsAuthMeta {
	meta := needsAuthMeta{
		Error:            "needs_authorization",
		Message:          msg,
		AuthorizationURL: authURL,
		ResumeToken:      n.ResumeToken,
		Scopes:           scopes,
		ErrorType:        "authorization_required",
		ToolName:         n.Tool,
		RequiredScopes:   scopes,
		ConsentURL:       authURL,
	}
	if !n.ExpiresAt.IsZero() {
		meta.ExpiresAt = n.ExpiresAt.UnixMilli()
	}
	return meta
}

// ConsentLink is the consent link of n (the authorizationUrl of its
// prompts), or ok=false without a usable consent URL.
func ConsentLink(n NeedsAuthorization) (string, bool) { return consentURL(n) }

// consentURL builds the consent link of n, or ok=false without a usable
// consent URL.
func consentURL(n NeedsAuthorization) (string, bool) {
	u, err := url.Parse(n.ConsentURL)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return "", false
	}
	params := [][2]string{{"tool", n.Tool}, {"scopes", strings.Join(n.Missing, ",")}}
	for _, p := range [][2]string{
		{"session_id", n.SessionID},
		{"agent_did", n.AgentDID},
		{"project_id", n.ProjectID},
		{"resume_token", n.ResumeToken},
	} {
		if p[1] != "" {
			params = append(params, p)
		}
	}
	return setQuery(n.ConsentURL, params), true
}

// setQuery sets params in the query of the URL s, after removing every
// parameter of the same names (a server might read the first occurrence,
// which would then not be ours), and keeps the rest of s as written, which a
// parse and re-serialize through net/url would not guarantee.
func setQuery(s string, params [][2]string) string {
	var frag string
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s, frag = s[:i], s[i:]
	}
	var query string
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s, query = s[:i], s[i+1:]
	}
	var b strings.Builder
	b.Grow(len(s) + len(query) + len(frag) + 64)
	b.WriteString(s)
	sep := byte('?')
	for part := range strings.SplitSeq(query, "&") {
		if part == "" {
			continue
		}
		key, _, _ := strings.Cut(part, "=")
		if name, err := url.QueryUnescape(key); err == nil && hasParam(params, name) {
			continue
		}
		b.WriteByte(sep)
		b.WriteString(part)
		sep = '&'
	}
	for _, p := range params {
		b.WriteByte(sep)
		b.WriteString(url.QueryEscape(p[0]))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(p[1]))
		sep = '&'
	}
	b.WriteString(frag)
	return b.String()
}

func hasParam(params [][2]string, name string) bool {
	for _, p := range params {
		if p[0] == name {
			return true
		}
	}
	return false
}
