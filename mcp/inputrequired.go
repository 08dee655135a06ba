package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Input-required results (MCP 2026-07-28, multi round-trip requests): in
// place of a server-initiated request, a result with resultType
// "input_required" lists inputRequests (here one URL-mode
// elicitation/create) and an opaque requestState the client echoes when it
// retries the call with its inputResponses.

// MethodElicit is the method of an elicitation request.
const MethodElicit = "elicitation/create"

// ConsentInputID is the inputRequests key of the edge's consent prompt.
const ConsentInputID = "mcpi-consent"

type urlElicitParams struct {
	Mode          string `json:"mode"`
	Message       string `json:"message"`
	URL           string `json:"url"`
	ElicitationID string `json:"elicitationId"`
}

type inputRequest struct {
	Method string          `json:"method"`
	Params urlElicitParams `json:"params"`
}

type inputRequiredResult struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]inputRequest `json:"inputRequests"`
	RequestState  string                  `json:"requestState,omitempty"`
	Meta          any                     `json:"_meta,omitempty"`
}

// NeedsAuthorizationInput is NeedsAuthorizationResult for a 2026 client that
// declared URL-mode elicitation: an input-required result whose one input
// request (ConsentInputID) is a URL-mode elicitation/create to the consent
// link (the same link, with tool, scopes, agent_did and resume_token), with
// the resume token as elicitationId and requestState as given. The
// needs_authorization _meta rides along for MCP-I agents. ok is false
// without a usable consent URL: then answer NeedsAuthorizationResult.
func NeedsAuthorizationInput(id json.RawMessage, n NeedsAuthorization, requestState string) (_ []byte, ok bool) {
	authURL, ok := consentURL(n)
	if !ok || n.ResumeToken == "" {
		return nil, false
	}
	scopes := n.Missing
	if scopes == nil {
		scopes = []string{}
	}
	msg := fmt.Sprintf("Tool %q needs authorization for scope(s) %s. Approve access at the link, then retry.", n.Tool, strings.Join(scopes, ", "))
	res, err := marshal(inputRequiredResult{
		ResultType: ResultTypeInputRequired,
		InputRequests: map[string]inputRequest{ConsentInputID: {
			Method: MethodElicit,
			Params: urlElicitParams{Mode: "url", Message: msg, URL: authURL, ElicitationID: n.ResumeToken},
		}},
		RequestState: requestState,
		Meta:         authMeta(n, msg, authURL, scopes),
	})
	if err != nil {
		return nil, false
	}
	return resultResponse(id, res), true
}

// DeclaresURLElicitation reports whether the request params declare, in
// _meta["io.modelcontextprotocol/clientCapabilities"], the capability
// elicitation.url (an object): the 2026 client can show a URL-mode
// elicitation. Anything unreadable or ambiguous counts as not declared,
// which only chooses the older form of the prompt.
func DeclaresURLElicitation(params []byte) bool {
	v := params
	for _, name := range [...]string{"_meta", MetaClientCapabilities, "elicitation", "url"} {
		next, err := strictMember(v, name)
		if err != nil || next == nil {
			return false
		}
		v = next
	}
	return v[0] == '{'
}

// RequestStateOf returns params.requestState of a retried call: ok is false
// when there is none (absent or null). A requestState that is not a string,
// or is given twice in any letter case, is ErrInvalidParams.
func RequestStateOf(params []byte) (state string, ok bool, err error) {
	v, err := strictMember(params, "requestState")
	if err != nil || v == nil || string(v) == "null" {
		return "", false, err
	}
	s, isStr := stringValue(v, 0, len(v))
	if !isStr {
		return "", false, &MessageError{Index: -1, Member: "params.requestState", Err: ErrInvalidParams}
	}
	return s, true, nil
}
