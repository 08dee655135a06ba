// Package mcp reads and rewrites the MCP (JSON-RPC 2.0) messages that pass
// through the edge (docs/protocol/mcpi.md#tool-policy-answers):
//
//   - ParseMessages and ToolCallName find the tools/call names of a request
//     body (single or batch) for per-tool policy;
//   - Policy.Decide applies per-tool rules to the scopes a verified
//     credential grants, whatever its format or carrier;
//   - FilterToolsList and FilterResponseBody hide tools an agent may not
//     call from tools/list answers;
//   - NeedsAuthorizationResult and ToolErrorResult build the tool results
//     the edge answers a refused tools/call with;
//   - CheckActions, EnforceActions and CheckResponseBody guard handshake
//     actions in tool results (docs/protocol/mcpi.md#handshake-actions);
//   - NewSSERewriter applies any of these, event by event, to a
//     text/event-stream response without buffering the stream.
//
// It works on raw bytes: members it does not own stay byte-identical, keys
// are matched exactly (case-sensitive, after unescaping), and a duplicate of
// a member it reads is an error rather than a guess, because the upstream or
// the client may resolve it differently. It imports neither Caddy nor vc.
package mcp
