package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Level3Config holds the Level 3 settings (the JSON-RPC challenge-response
// handshake). It is embedded in Handler, so its fields are top-level JSON
// config fields of http.handlers.mcpi.
type Level3Config struct{}

// level3 is the Level 3 runtime state of a Handler.
type level3 struct{}

// provisionLevel3 runs at the end of Provision (after provisionLevel2).
func (h *Handler) provisionLevel3(ctx caddy.Context) error { return nil }

// validateLevel3 runs from Validate.
func (h *Handler) validateLevel3() error { return nil }

// cleanupLevel3 runs from Cleanup, also after a partial Provision.
func (h *Handler) cleanupLevel3() error { return nil }

// unmarshalLevel3 parses a Level 3 subdirective of the mcpi block;
// handled is false for a name it does not know.
func (h *Handler) unmarshalLevel3(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	return false, nil
}

// serveLevel3 answers or proxies handshake traffic (the handshake/verify
// endpoints, /.well-known/mcp-i.json) and reports whether it did. Runs after
// the identity headers were stripped and before any credential is required.
func (h *Handler) serveLevel3(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) (handled bool, err error) {
	return false, nil
}

// sessionDelegation returns the delegation bound to an edge-issued
// handshake session presented by r (Mcp-Session-Id or
// X-Mcpi-Handshake-Session), or nil when r presents none. It is consulted
// only when the request carries no credential.
func (h *Handler) sessionDelegation(r *http.Request) (*vc.Delegation, error) { return nil, nil }
