package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// The settings' types are edge's: their JSON tags are the handler's JSON
// config, and their durations (edge.Duration) read "5m", "1d" and
// nanoseconds as caddy.Duration does.
type (
	// Level2Config holds the Level 2 settings.
	Level2Config = edge.Level2Config
	// ReputationConfig says where X-Agent-Reputation-Score comes from.
	ReputationConfig = edge.ReputationConfig
	// Level3Config holds the Level 3 handshake settings.
	Level3Config = edge.Level3Config
	// DelegationConfig holds the revocation and Linked Data proof settings.
	DelegationConfig = edge.DelegationConfig
	// ChainFetchConfig says where a chain's missing parents may be fetched.
	ChainFetchConfig = edge.ChainFetchConfig
	// PolicyConfig holds the MCP-aware authorization settings.
	PolicyConfig = edge.PolicyConfig
	// ToolPolicy is the rule for the tools whose name matches Name.
	ToolPolicy = edge.ToolPolicy
	// ToolAnnotationsPolicy gives scopes by tool annotation class.
	ToolAnnotationsPolicy = edge.ToolAnnotationsPolicy
	// ObservabilityConfig holds the metrics and audit log settings.
	ObservabilityConfig = edge.ObservabilityConfig
	// ProofConfig holds the KYA-OS extension settings (request and
	// response proofs, the declaration gate).
	ProofConfig = edge.ProofConfig
)

// edgeConfig is h's configuration as the edge takes it: edge.Config as
// the JSON gave it, with the front door's settings in the edge's form (the
// user placeholder becomes the SignedInUser hook in Provision).
func (h *Handler) edgeConfig() edge.Config {
	cfg := h.Config
	cfg.AuthorizationServer = h.AuthorizationServer.edgeConfig()
	return cfg
}

// caddyUUIDVar is the request variable in which Caddy keeps the value of
// {http.request.uuid} once made (caddyhttp's replacer; pinned by
// TestRequestIDHook).
const caddyUUIDVar = "uuid"

// caddyHooks give the edge what Caddy knows of a request.
// Identity is set per handler (placeholders.go).
var caddyHooks = edge.Hooks{
	RequestID: func(r *http.Request) string {
		// {http.request.uuid} is generated on first use (seven allocations)
		// and then kept in the request's "uuid" variable and added to the
		// access log entry. The audit entry reuses it when something before
		// the edge made it, so that the two logs join, and does not make
		// it otherwise: the edge then gives the entry an id of its own.
		if id, ok := caddyhttp.GetVar(r.Context(), caddyUUIDVar).(fmt.Stringer); ok {
			return id.String()
		}
		return ""
	},
	ClientIP: func(r *http.Request) string {
		ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
		return ip
	},
	TrustedProxy: func(r *http.Request) bool {
		trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
		return trusted
	},
	Original: func(r *http.Request) (string, *url.URL) {
		orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
		if !ok {
			return "", nil
		}
		return orig.Method, orig.URL
	},
	UpstreamHeader: func(r *http.Request, name string) (string, bool) {
		// reverse_proxy leaves the upstream's response headers in
		// {http.reverse_proxy.header.*}.
		repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if !ok || repl == nil {
			return "", false
		}
		return repl.GetString("http.reverse_proxy.header." + name)
	},
}
