package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Level2Config holds the Level 2 settings (identity headers for MCP-I-aware
// upstreams). It is embedded in Handler, so its fields are top-level JSON
// config fields of http.handlers.mcpi.
type Level2Config struct{}

// level2 is the Level 2 runtime state of a Handler.
type level2 struct{}

// provisionLevel2 runs at the end of Provision.
func (h *Handler) provisionLevel2(ctx caddy.Context) error { return nil }

// validateLevel2 runs from Validate.
func (h *Handler) validateLevel2() error { return nil }

// cleanupLevel2 runs from Cleanup, also after a partial Provision.
func (h *Handler) cleanupLevel2() error { return nil }

// unmarshalLevel2 parses a Level 2 subdirective of the mcpi block;
// handled is false for a name it does not know.
func (h *Handler) unmarshalLevel2(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	return false, nil
}

// serveLevel2 answers the edge's own Level 2 documents (JWKS, did.json) and
// reports whether it did. Runs after the identity headers were stripped and
// before any credential is required.
func (h *Handler) serveLevel2(w http.ResponseWriter, r *http.Request) (handled bool, err error) {
	return false, nil
}

// injectIdentity sets the Level 2 headers on the request going upstream.
// Runs only after d verified and the client's identity headers were stripped.
func (h *Handler) injectIdentity(r *http.Request, d *vc.Delegation) error { return nil }
