package toolpolicy

import (
	"net/http"
	"slices"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// stepUpScope reports whether a request is a single tools/call refused
// for missing scopes, made with a credential the front door issued, and
// the scopes to ask for then: the granted ones and the missing ones, so
// that an OAuth client asks the user again through the same consent and
// keeps what it had. stepUp answers it the OAuth way (RFC 6750 §3.1):
// 403 insufficient_scope with that scope. Other clients get the tool
// result they always got.
func (p *Policy) stepUpScope(msgs []mcp.Message, batch bool, decisions []mcp.Decision, d *vc.Delegation) (string, bool) {
	if p.parts.Front == nil || d == nil || batch || len(msgs) != 1 || !authserver.IsUserDID(d.Issuer) {
		return "", false
	}
	dec := decisions[0]
	if dec.Allowed || dec.Reason != mcp.ReasonInsufficientScope || len(dec.Missing) == 0 {
		return "", false
	}
	scopes := slices.Clone(d.Scopes)
	for _, s := range dec.Missing {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return strings.Join(scopes, " "), true
}

// stepUp is the refusal asking an OAuth client to authorize scope.
func stepUp(scope string) *refusal.Refusal {
	return &refusal.Refusal{Status: http.StatusForbidden, Reason: "insufficient_scope", OAuth: &refusal.OAuth{Code: "insufficient_scope",
		Description: "the delegation lacks a scope this tool needs: authorize again with the scopes named in WWW-Authenticate",
		Scope:       scope, Challenge: true}}
}
