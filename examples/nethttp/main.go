// Command nethttp is an MCP server guarded by the edge without Caddy: the
// official Go SDK's Streamable HTTP handler, wrapped by edge.Handler.Wrap.
// Only agents presenting a delegation from a trusted user reach the tools,
// and the server learns who they are from X-Agent-DID and X-User-DID,
// which the edge sets (Level 2) after removing whatever the client sent.
//
//	go run ./examples/nethttp -trust did:key:z6Mk... -addr 127.0.0.1:8090
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address (MCP endpoint at /mcp)")
	trust := flag.String("trust", "", "issuer DIDs whose delegations are accepted, space-separated, or *")
	flag.Parse()

	guarded, err := newServer(strings.Fields(*trust))
	if err != nil {
		log.Fatal(err)
	}
	defer guarded.Close()
	log.Printf("MCP server behind the edge on http://%s/mcp", *addr)
	log.Fatal(http.ListenAndServe(*addr, guarded))
}

// server is the guarded MCP server.
type server struct {
	http.Handler
	edge *edge.Handler
}

func (s *server) Close() error { return s.edge.Close() }

// newServer builds the MCP server and puts the edge in front of it.
func newServer(trusted []string) (*server, error) {
	e, err := edge.New(edge.Config{
		TrustedIssuers: trusted,
		Level:          2, // tell the server who is calling
		Level2Config:   edge.Level2Config{UpstreamMCPI: edge.UpstreamMCPIOn},
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", e.Wrap(mcpHandler()))
	return &server{Handler: mux, edge: e}, nil
}

// whoamiOutput is what the whoami tool reports.
type whoamiOutput struct {
	AgentDID   string `json:"agent_did"`
	UserDID    string `json:"user_did"`
	Reputation string `json:"reputation_score,omitempty"`
}

// mcpHandler is a plain MCP server with one tool that reports the identity
// the edge established.
func mcpHandler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "nethttp-example", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Who the edge says is calling."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoamiOutput, error) {
			h := req.Extra.Header
			out := whoamiOutput{AgentDID: h.Get("X-Agent-DID"), UserDID: h.Get("X-User-DID"), Reputation: h.Get("X-Agent-Reputation-Score")}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "agent " + out.AgentDID}}}, out, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}
