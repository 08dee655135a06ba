// Package proofstep is the KYA-OS step of the edge's pipeline
// (org.kya-os/decentralized-authority, docs/kyaos.md): the declaration
// gate before admission, the request proof after it, bound to the
// delegation's agent, and the edge's signed answers (response proofs,
// consent challenges, resume tokens). It applies an edge/proof Gate to
// one route: the names the route answers under, the edge's signing key,
// the consent page. No function here writes a response: a refused request
// is a *refusal.Refusal, which the Handler writes.
package proofstep

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/internal/loglimit"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"go.uber.org/zap"
)

// Route is what the step reads of the route's configuration.
type Route struct {
	// EdgeDID and UpstreamDID, when set, fix the proofs' audience
	// (UpstreamDID first); else it is did:web of the Host.
	EdgeDID, UpstreamDID string
	// Audiences the route answers to: with neither DID, a proof is taken
	// only under a Host they name.
	Audiences []string
	// MaxBody is the largest request body read, in bytes.
	MaxBody int64
}

// Parts are what the step uses of the route's other parts.
type Parts struct {
	Site *site.Site
	// Identity signs the edge's answers; nil below level 2.
	Identity *identity.Identity
	Logger   *zap.Logger
	// Consent is the consent URL of a signed challenge for the refused
	// call of tool by the caller holding d, with resume its resume token
	// ("" when none is usable); nil when the route has no consent URL or
	// page, and then no challenge is signed.
	Consent func(r *http.Request, tool string, dec mcp.Decision, d *vc.Delegation, resume string) string
}

// Step is the KYA-OS step for one route. It is safe for concurrent use.
type Step struct {
	gate  *proof.Gate
	route Route
	parts Parts
	// hostDID is the proofs' audience by Host.
	hostDID hostDID
	// resumeWarn limits the warnings that a resumeToken could not be
	// issued (challenge.go).
	resumeWarn loglimit.Every
}

// New builds the step over gate, whose nonce store is the route's.
func New(gate *proof.Gate, route Route, parts Parts) *Step {
	if parts.Logger == nil {
		parts.Logger = zap.NewNop()
	}
	return &Step{gate: gate, route: route, parts: parts}
}

// Gate is the route's KYA-OS settings, as the edge's documents and the
// framing step read them.
func (p *Step) Gate() *proof.Gate { return p.gate }
