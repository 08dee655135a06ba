package toolpolicy

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"go.uber.org/zap"
)

// What the step reads of the rest of the edge: parts built before it, and
// the other steps through the small interfaces it defines, so that it
// never holds the handler or calls back into the pipeline.

// Parts are what the step reads of the rest of the edge, built before it.
type Parts struct {
	Site     *site.Site
	Recorder *observe.Recorder
	Logger   *zap.Logger
	// Proofs signs consent challenges and denials and checks resume
	// tokens (the KYA-OS step).
	Proofs Proofs
	// Sessions finds the Level 3 session that makes a delegation
	// holder-bound; nil without Level 3.
	Sessions Sessions
	// Front, when on, asks OAuth clients to step up and answers the
	// draft-kya-http-02 challenge; nil when off.
	Front *authserver.Server
	// Consent is where prompts send the user.
	Consent Consent
	// Approve verifies the delegation a user approved at the edge's
	// consent page and tells the host and the upstream who calls with it
	// (agentconsent.go).
	Approve func(r *http.Request, raw []byte) (*vc.Delegation, error)
	// Identity reads an agent's reputation for the rules; nil below
	// level 2.
	Identity *identity.Identity
	// Limiter counts the rate limits; nil without them.
	Limiter *ratelimit.Limiter
	// Keys is the storage whose key seals requestStates (nil: a random
	// key for the handler's life).
	Keys assertion.Storage
}

// Proofs is what the policy asks of the KYA-OS proof step.
type Proofs interface {
	// CheckResume refuses a retried call m of tool whose resumeToken of
	// the edge's is not live, unused and issued to this agent for tool.
	CheckResume(r *http.Request, m mcp.Message, tool string, d *vc.Delegation, adm observe.Decision) error
	// SignedChallenge is the signed needs_authorization answer to the
	// denied call m; ok is false when none applies.
	SignedChallenge(w http.ResponseWriter, r *http.Request, batch bool, m mcp.Message, tool string, dec mcp.Decision, d *vc.Delegation) ([]byte, bool)
	// SignedDenial is resp, the tool error answering the denied call m,
	// signed; ok is false when the edge does not sign it.
	SignedDenial(w http.ResponseWriter, r *http.Request, batch bool, m mcp.Message, resp []byte, reason string, d *vc.Delegation) ([]byte, bool)
	// Signer is the edge's signer for answers to r.
	Signer(r *http.Request) proof.Signer
}

// Sessions resolves the Level 3 handshake session of a request: nil
// without one.
type Sessions interface {
	Session(r *http.Request) (*vc.Delegation, error)
}

// Consent is where a prompt sends the user: consent_url, else, with the
// front door on, the edge's own agent consent page.
type Consent interface {
	// URL is the consent URL of a prompt for the refused call of tool by
	// the caller holding d, with resume its resume token; "" when none.
	URL(r *http.Request, tool string, dec mcp.Decision, d *vc.Delegation, resume string) string
	// Own reports whether the edge's own consent page answers prompts.
	Own() bool
}
