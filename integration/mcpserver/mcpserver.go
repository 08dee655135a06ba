// Package mcpserver is the demo MCP server that sits behind the caddy-mcpi
// edge: a real server built with the official MCP Go SDK, served over
// Streamable HTTP. cmd/mcpi-demo runs it as a process; the integration tests
// run it in-process as the upstream they record.
//
// Its tools are chosen to make the edge's behaviour visible: greet is the
// plain request/response case, whoami shows which identity headers reached
// the upstream (nothing the client forged, only what the edge set), and count
// streams progress notifications so a buffering proxy would show up as late,
// bunched notifications.
package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/mcpiverify"
)

// Path is where the MCP endpoint is served.
const Path = "/mcp"

// HealthPath answers 200 "ok" without MCP, for readiness checks that should
// not need a delegation (it is normally reached directly, not via the edge).
const HealthPath = "/healthz"

// MaxCount bounds the count tool so one call cannot hold a stream open for
// long.
const MaxCount = 100

// Options configures the server. The zero value is usable.
type Options struct {
	// CountInterval is the pause between two progress notifications of the
	// count tool. Default 300ms: long enough that a buffering proxy is
	// obvious, short enough for tests.
	CountInterval time.Duration
	// AllowAnyHost disables the SDK's DNS-rebinding guard, which rejects a
	// request that arrives on a loopback listener with a non-loopback Host
	// header. Behind a reverse proxy that keeps the public Host (Caddy's
	// default) the guard would refuse every request; set this, or have the
	// proxy rewrite Host to the upstream address.
	AllowAnyHost bool
	// Logger receives SDK logs; nil means none.
	Logger *slog.Logger
	// EdgeVerifier, when set, checks the edge's X-Verified-Delegation
	// assertion in whoami, as an MCP-I-aware service would: the identity
	// headers are only as good as the edge's signature over them.
	EdgeVerifier *mcpiverify.Verifier
	// Stateless serves the SDK's stateless handler: no Mcp-Session-Id, no
	// GET stream, each POST answered on its own. It is what MCP 2026-07-28
	// clients need (the stateful handler refuses that version); clients of
	// 2025-11-25 still initialize and call as before, each request on a
	// throwaway session.
	Stateless bool
	// CacheTTL, when positive, is the ttlMs of every 2026 list and read
	// result (the SDK's default scope, "public", kept): what a server does
	// that lets clients cache its tool list. Zero leaves the SDK's ttlMs 0,
	// "stale at once".
	CacheTTL time.Duration
}

// Identity is what whoami reports: the identity headers exactly as the
// upstream received them. Behind the edge, the X-* values can only come from
// the edge itself (it strips client-supplied ones).
type Identity struct {
	AgentDID           string `json:"agent_did,omitempty" jsonschema:"X-Agent-DID as received"`
	UserDID            string `json:"user_did,omitempty" jsonschema:"X-User-DID as received"`
	VerifiedDelegation bool   `json:"verified_delegation" jsonschema:"whether an X-Verified-Delegation header was received"`
	ReputationScore    string `json:"reputation_score,omitempty" jsonschema:"X-Agent-Reputation-Score as received"`
	Authorization      bool   `json:"authorization" jsonschema:"whether an Authorization header reached the server"`
	// EdgeVerified: the X-Verified-Delegation assertion verified against the
	// edge's JWKS and names the same agent and user as the headers.
	EdgeVerified bool     `json:"edge_verified" jsonschema:"whether the edge's signed assertion verified (only when the server checks it)"`
	EdgeError    string   `json:"edge_error,omitempty" jsonschema:"why the edge assertion did not verify"`
	Scopes       []string `json:"scopes,omitempty" jsonschema:"scopes named by the verified edge assertion"`
}

// GreetInput is the argument of greet.
type GreetInput struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// CountInput is the argument of count.
type CountInput struct {
	N int `json:"n" jsonschema:"how many progress notifications to send (1-100)"`
}

// CountOutput is the result of count.
type CountOutput struct {
	Sent int `json:"sent" jsonschema:"progress notifications sent"`
}

// New returns the MCP server with the greet, whoami and count tools.
func New(opts Options) *mcp.Server {
	interval := opts.CountInterval
	if interval <= 0 {
		interval = 300 * time.Millisecond
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpi-demo", Version: "0.1.0"}, &mcp.ServerOptions{
		Logger: opts.Logger,
		// An empty capability set instead of the SDK's historical default
		// {"logging":{}}: the demo sends no log messages.
		Capabilities: &mcp.ServerCapabilities{},
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			if opts.CacheTTL > 0 {
				c.TTLMs = int(opts.CacheTTL / time.Millisecond)
			}
		},
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "greet",
		Description: "Say hello to someone.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, in GreetInput) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name}},
		}, nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "whoami",
		Description: "Report the identity headers this server received (set by the edge, never by the client).",
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Identity, error) {
		id := identityOf(req)
		if opts.EdgeVerifier != nil && id.VerifiedDelegation {
			verifyEdge(ctx, opts.EdgeVerifier, req.Extra.Header.Get("X-Verified-Delegation"), &id)
		}
		text := fmt.Sprintf("agent: %s\nuser: %s\nverified delegation header: %t\nedge assertion verified: %t",
			orNone(id.AgentDID), orNone(id.UserDID), id.VerifiedDelegation, id.EdgeVerified)
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: text}},
		}, id, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "count",
		Description: "Send n progress notifications, one per interval, then return. Pass a progress token to receive them.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, in CountInput) (*mcp.CallToolResult, CountOutput, error) {
		if in.N < 1 || in.N > MaxCount {
			return nil, CountOutput{}, fmt.Errorf("n must be between 1 and %d", MaxCount)
		}
		token := req.Params.GetProgressToken()
		sent := 0
		for i := 1; i <= in.N; i++ {
			if token != nil {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      float64(i),
					Total:         float64(in.N),
					Message:       fmt.Sprintf("%d of %d", i, in.N),
				})
				if err != nil {
					return nil, CountOutput{}, fmt.Errorf("sending progress: %w", err)
				}
				sent++
			}
			// Sleep after every notification, including the last, so the
			// result always trails the last notification by one interval:
			// a proxy that buffers until the response ends would deliver
			// them all together with the result.
			select {
			case <-ctx.Done():
				return nil, CountOutput{}, ctx.Err()
			case <-time.After(interval):
			}
		}
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("counted to %d", in.N)}},
		}, CountOutput{Sent: sent}, nil
	})

	s.AddResource(&mcp.Resource{URI: AboutURI, Name: "about", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: AboutURI, MIMEType: "text/plain", Text: AboutText},
			}}, nil
		})
	return s
}

// AboutURI is the demo's one resource, a short text about the server: it
// gives resources/read (and the 2026 response cache) something to read.
const AboutURI = "mcpi-demo://about"

// AboutText is the content of AboutURI.
const AboutText = "mcpi-demo: an MCP server behind the caddy-mcpi edge.\n"

// Handler serves the MCP server over Streamable HTTP at Path, and HealthPath.
// By default sessions are stateful (Mcp-Session-Id), so the edge is
// exercised with the session header and the standalone GET stream as real
// 2025 clients use them; Options.Stateless serves both protocol eras.
func Handler(opts Options) http.Handler {
	s := New(opts)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Logger:                     opts.Logger,
		DisableLocalhostProtection: opts.AllowAnyHost,
		// Idle sessions from clients that vanish without DELETE would
		// otherwise live forever in a long-running demo.
		SessionTimeout: 30 * time.Minute,
		Stateless:      opts.Stateless,
	})
	mux := http.NewServeMux()
	mux.Handle(Path, mcpHandler)
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// identityOf reads the identity headers of the HTTP request that carried the
// call. Extra is nil on non-HTTP transports (in-memory, stdio).
func identityOf(req *mcp.CallToolRequest) Identity {
	if req.Extra == nil || req.Extra.Header == nil {
		return Identity{}
	}
	h := req.Extra.Header
	_, verified := h["X-Verified-Delegation"]
	return Identity{
		AgentDID:           h.Get("X-Agent-DID"),
		UserDID:            h.Get("X-User-DID"),
		VerifiedDelegation: verified,
		ReputationScore:    h.Get("X-Agent-Reputation-Score"),
		Authorization:      h.Get("Authorization") != "",
	}
}

// verifyEdge checks the edge's signed assertion and that it vouches for the
// same agent and user as the plain headers.
func verifyEdge(ctx context.Context, v *mcpiverify.Verifier, token string, id *Identity) {
	got, err := v.Verify(ctx, token)
	switch {
	case err != nil:
		id.EdgeError = err.Error()
	case got.AgentDID != id.AgentDID || got.UserDID != id.UserDID:
		id.EdgeError = "assertion names another agent or user than the headers"
	default:
		id.EdgeVerified = true
		id.Scopes = got.Scopes
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
