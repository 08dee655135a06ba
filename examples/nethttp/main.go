// Command nethttp is an MCP server guarded by the edge without Caddy: the
// official Go SDK's Streamable HTTP handler, wrapped by edge.Handler.Wrap.
// Only agents presenting a delegation from a trusted user reach the tools,
// and the server learns who they are from X-Agent-DID and X-User-DID,
// which the edge sets (Level 2) after removing whatever the client sent.
//
//	go run ./examples/nethttp
//
// Without -trust it makes a demo user key in memory, trusts it, and prints
// a delegation for a demo agent with the curl command that uses it.
package main

import (
	"context"
	"crypto"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address (MCP endpoint at /mcp)")
	trust := flag.String("trust", "", "issuer DIDs whose delegations are accepted, space-separated, or *; "+
		"default: a demo user made at start, whose delegation is printed")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	trusted := strings.Fields(*trust)
	if len(trusted) == 0 {
		did, tok, err := demoDelegation(base)
		if err != nil {
			log.Fatal(err)
		}
		trusted = []string{did}
		fmt.Fprintf(os.Stderr, "Trusting the demo user %s. Its delegation to a demo agent, for an hour:\n\n"+
			"TOKEN=%s\n\n"+
			"curl -s %s/mcp -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' \\\n"+
			"  -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \\\n"+
			"  -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"whoami\",\"arguments\":{}}}'\n\n",
			did, tok, base)
	}
	guarded, err := newServer(trusted, localAudiences(ln.Addr().String()))
	if err != nil {
		log.Fatal(err)
	}
	defer guarded.Close()
	log.Printf("MCP server behind the edge on %s/mcp", base)
	log.Fatal(http.Serve(ln, guarded))
}

// server is the guarded MCP server.
type server struct {
	http.Handler
	edge *edge.Handler
}

func (s *server) Close() error { return s.edge.Close() }

// newServer builds the MCP server and puts the edge in front of it,
// accepting credentials addressed to one of audiences.
func newServer(trusted, audiences []string) (*server, error) {
	e, err := edge.New(edge.Config{
		TrustedIssuers: trusted,
		Audiences:      audiences,
		Level:          2, // tell the server who is calling
		Level2Config:   edge.Level2Config{UpstreamMCPI: edge.UpstreamMCPIOn},
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", e.Wrap(mcpHandler()))
	// The edge answers its own documents: the protected-resource metadata
	// its 401 points clients at, and the keys its assertions are signed
	// with. Any other path under /.well-known/ asks for a credential, as
	// /mcp does, and then is not found.
	mux.Handle("/.well-known/", e.Wrap(http.NotFoundHandler()))
	return &server{Handler: mux, edge: e}, nil
}

// localAudiences are the names a client of the server at addr (host:port)
// addresses its credentials to: the URL it calls (http://, as a local
// server has no TLS; on loopback under localhost too) and the did:web of
// that host.
func localAudiences(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	hosts := []string{host}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		hosts = append(hosts, "localhost")
	}
	var auds []string
	for _, h := range hosts {
		hp := net.JoinHostPort(h, port)
		auds = append(auds, "http://"+hp, "did:web:"+strings.ReplaceAll(hp, ":", "%3A"))
	}
	return auds
}

// demoDelegation makes a user key and a delegation from it to a new agent
// key for the server at base, valid for an hour.
func demoDelegation(base string) (userDID, token string, err error) {
	user, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		return "", "", err
	}
	userDID, userKID, err := keyDID(user)
	if err != nil {
		return "", "", err
	}
	agent, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		return "", "", err
	}
	agentDID, _, err := keyDID(agent)
	if err != nil {
		return "", "", err
	}
	token, err = vc.IssueJWT(user, userKID, vc.Template{
		AgentDID: agentDID, UserDID: userDID, Audience: []string{base}, ExpiresAt: time.Now().Add(time.Hour),
	})
	return userDID, token, err
}

func keyDID(priv crypto.PrivateKey) (did, kid string, err error) {
	pub, err := didresolver.PublicKeyOf(priv)
	if err != nil {
		return "", "", err
	}
	return didresolver.KeyDID(pub)
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
	// Stateless, answering in plain JSON: a client (curl too) may call a
	// tool without initializing a session first.
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}
