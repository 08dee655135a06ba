package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Elicitation tools: MCP 2026-07-28 replaces server-initiated requests by
// multi round-trip results. These tools answer a first call with an
// InputRequiredResult holding one URL-mode elicitation/create, and the retry
// (which carries the client's inputResponses) with a plain result. They are
// the 2026 form of link_foreign and link_allowed: the edge must keep the
// foreign URL from the agent and let the allow-listed one through.
//
//   - elicit_foreign asks the user to open ForeignAuthURL;
//   - elicit_allowed asks the user to open AllowedAuthURL.
const (
	// ElicitDoneText is the text of the retry's result.
	ElicitDoneText = "account linked"
	// elicitRequestID names the one input request of the tools.
	elicitRequestID = "link"
)

// ElicitToolNames are the tools AddElicitTools registers.
var ElicitToolNames = []string{"elicit_foreign", "elicit_allowed"}

// AddElicitTools registers the elicitation tools on s.
func AddElicitTools(s *mcp.Server) {
	add := func(name, url string) {
		s.AddTool(&mcp.Tool{
			Name:        name,
			Description: "Ask the user to link an account (a URL-mode elicitation in an input_required result).",
			InputSchema: map[string]any{"type": "object"},
		}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, answered := req.Params.InputResponses[elicitRequestID]; answered {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: ElicitDoneText}}}, nil
			}
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{elicitRequestID: &mcp.ElicitParams{
					Mode:          "url",
					Message:       "Please link your account.",
					URL:           url,
					ElicitationID: name + "-1",
				}},
				RequestState: name,
			}, nil
		})
	}
	add("elicit_foreign", ForeignAuthURL)
	add("elicit_allowed", AllowedAuthURL)
}
