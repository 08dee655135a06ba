package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// modernProtocol is MCP 2026-07-28: no initialize, no Mcp-Session-Id; every
// request carries its protocol version in _meta and Mcp-Method / Mcp-Name
// headers.
const modernProtocol = "2026-07-28"

// tsClientDir holds the TypeScript SDK v2 client script and its lock file.
const tsClientDir = "tsclient"

// needTSClient installs the TypeScript client's pinned dependencies once
// per test binary, or skips the test when Node 20+ and npm are missing
// (fails instead under MCPI_REQUIRE_NODE).
func needTSClient(t *testing.T) {
	t.Helper()
	needNodePackages(t, tsClientDir)
}

// tsExchange is one HTTP request the TypeScript client made and the status
// it got back.
type tsExchange struct {
	Method          string `json:"method"`
	MCPMethod       string `json:"mcpMethod"`
	MCPName         string `json:"mcpName"`
	ProtocolVersion string `json:"protocolVersion"`
	Status          int    `json:"status"`
}

// tsError is an error the SDK threw, as the agent's code would see it.
type tsError struct {
	Name    string `json:"name"`
	Code    any    `json:"code"`
	Message string `json:"message"`
}

// tsResult is what client.mjs prints; each scenario fills its part.
type tsResult struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Tools           []string       `json:"tools"`
	Result          map[string]any `json:"result"`
	Error           *tsError       `json:"error"`
	Progress        []struct {
		Progress float64 `json:"progress"`
		AtMs     float64 `json:"atMs"`
	} `json:"progress"`
	ResultAtMs    float64          `json:"resultAtMs"`
	HonoredFilter map[string]any   `json:"honoredFilter"`
	Closed        string           `json:"closed"`
	Elicitations  []map[string]any `json:"elicitations"`
	Lists         [][]string       `json:"lists"`
	HTTP          []tsExchange     `json:"http"`
}

// runTS runs one scenario of the TypeScript SDK v2 client against url and
// returns what it printed. opts go to the script as JSON (token, era, tool,
// args, uri, n, tokens, action, maxRounds).
func runTS(t *testing.T, url, scenario string, opts map[string]any) tsResult {
	t.Helper()
	needTSClient(t)
	arg, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", url, scenario, string(arg))
	cmd.Dir = tsClientDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs %s: %v\nstderr: %s", scenario, err, stderr.Bytes())
	}
	var res tsResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node client.mjs %s printed no JSON: %v\n%s\nstderr: %s", scenario, err, out, stderr.Bytes())
	}
	return res
}

// mustSucceed fails the test if the scenario ended in an SDK error.
func (r tsResult) mustSucceed(t *testing.T, what string) tsResult {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("%s: the TypeScript client threw %s (code %v): %s; exchanges %+v", what, r.Error.Name, r.Error.Code, r.Error.Message, r.HTTP)
	}
	return r
}

// text is the text of a tool result's only text content, "" otherwise.
func resultText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// mcp2026Policy is TestPolicySDK's policy at level 2, the elicitation
// tools allowed. The world's default credential grants greet:execute and
// files:read.
const mcp2026Policy = `level 2
		tool elicit_*
		` + policyConfig

// newMCP2026Harness starts the demo MCP server on the Go SDK's stateless
// handler (both protocol eras; SSE answers at mcpserver.Path, JSON at
// policyJSONPath) with the policy and elicitation tools, and Caddy in front
// of it with mcp2026Policy. Its lists say ttlMs 60000, cacheScope public.
func newMCP2026Harness(t *testing.T) *harness {
	t.Helper()
	// Lists cacheable for a minute, marked public by the SDK: the edge's
	// per-caller filtering must make them private.
	s := mcpserver.New(mcpserver.Options{CountInterval: countInterval, CacheTTL: time.Minute})
	mcpserver.AddPolicyTools(s)
	mcpserver.AddElicitTools(s)
	serve := func(o *mcp.StreamableHTTPOptions) http.Handler {
		o.Stateless = true
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, o)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, serve(&mcp.StreamableHTTPOptions{}))
	mux.Handle(policyJSONPath, serve(&mcp.StreamableHTTPOptions{JSONResponse: true}))
	return startPolicyEdge(t, mux, mcp2026Policy)
}

// modernHeaders are the HTTP headers of a 2026 request for method (and
// name, if not ""), with the credential if tok is not "".
func modernHeaders(tok, method, name string) http.Header {
	hdr := http.Header{"Mcp-Protocol-Version": {modernProtocol}, "Mcp-Method": {method}}
	if name != "" {
		hdr["Mcp-Name"] = []string{name}
	}
	if tok != "" {
		hdr["Authorization"] = []string{"Bearer " + tok}
	}
	return hdr
}

// modernBody is a 2026 JSON-RPC request: params plus the _meta every
// request of that era carries (protocol version, client capabilities).
func modernBody(id int, method string, params map[string]any) string {
	p := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernProtocol,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "0"},
	}}
	for k, v := range params {
		p[k] = v
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	return string(b)
}
