package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// PolicyConfig holds the MCP-aware authorization settings (per-tool policy,
// tools/list filtering, handshake-action checks). It is embedded in Handler,
// so its fields are top-level JSON config fields of http.handlers.mcpi.
type PolicyConfig struct{}

// policyState is the runtime state of the per-tool policy.
type policyState struct{}

// provisionPolicy runs at the end of Provision.
func (h *Handler) provisionPolicy(ctx caddy.Context) error { return nil }

// validatePolicy runs from Validate.
func (h *Handler) validatePolicy() error { return nil }

// unmarshalPolicy parses a policy subdirective of the mcpi block; handled is
// false for a name it does not know.
func (h *Handler) unmarshalPolicy(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	return false, nil
}

// admitAnonymous reports whether r, which presents no credential and no
// session, may go upstream anyway because everything it calls is allowed
// anonymously. body is the request body when the carriers read it, else nil.
func (h *Handler) admitAnonymous(r *http.Request, body []byte) bool { return false }

// enforcePolicy applies the per-tool policy to an admitted request (d is nil
// for an anonymous one) and may wrap w to filter or check the response. It
// returns handled when it answered the request itself.
func (h *Handler) enforcePolicy(w http.ResponseWriter, r *http.Request, d *vc.Delegation, body []byte) (_ http.ResponseWriter, handled bool, err error) {
	return w, false, nil
}
