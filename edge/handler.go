package edge

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// ServeNext admits the request if it carries a valid delegation credential
// (or a Level 3 session, or calls only anonymous tools), with its request
// proof where one is required; the numbered steps below are documented in
// docs/config/request.md. Only the per-tool policy and the response
// proofs may wrap the ResponseWriter, and neither buffers an SSE stream.
func (h *Handler) ServeNext(w http.ResponseWriter, r *http.Request, next Next) error {
	// 1. Identity headers are the edge's to set; a client's are lies.
	r = h.noteKYAAccept(r) // an opt-in among the kya-* names (kyahttp.go)
	h.carriers.StripIdentity(r)
	// The ancestors of a chain are read now and never travel on.
	chain := h.carriers.TakeChain(r)

	// 2. The RFC 9728 document is how a client learns what to present, so
	// it needs no credential.
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && isResourceMetadataPath(r.URL.Path) {
		h.serveResourceMetadata(w, r)
		return nil
	}
	// The KYA-OS server document (wellknown_mcp.go) needs none either.
	if h.serveWellKnownMCP(w, r) {
		return nil
	}
	if handled, err := h.serveIdentityDocuments(w, r); handled {
		return err
	}
	// 2b. The front door (frontdoor.go): OAuth metadata, registration,
	// consent, tokens, revocation and the users' DID documents.
	if h.serveFrontDoor(w, r) {
		return nil
	}
	if handled, err := h.serveLevel3(w, r, next, chain); handled {
		return err
	}

	// 3. An MCP POST is JSON (mediatype.go); then every enabled carrier.
	if notJSONPost(r) {
		return h.reject(w, r, errNotJSONMediaType, nil)
	}
	found, err := h.carriers.Find(w, r)
	if err != nil && (h.policy.pol == nil || err != carrier.ErrBodyNotJSON) {
		// A tool policy reads every body and refuses what is not JSON
		// itself (its 400 or 415), after the credential.
		return h.reject(w, r, err, nil)
	}
	// The one strict reading of the JSON-RPC body, shared by every step
	// that decides on it (rpcbody.go).
	var rb rpcBody
	// MCP framing (2026-07-28): headers that disagree with the body stop
	// here, before any credential or policy decision.
	if handled, err := h.checkFraming(w, r, &found, &rb); handled {
		return err
	}
	if found.Conflicting() {
		return h.reject(w, r, carrier.ErrConflict, &found.Credentials[0])
	}
	if found.ForeignBearer && h.NonDelegationBearer == BearerReject {
		return h.reject(w, r, carrier.ErrForeignBearer, nil)
	}
	// KYA-OS (kyaos.go): the declaration gate comes before admission.
	body, err := h.proofBody(w, r, &found)
	if err != nil {
		return h.reject(w, r, err, nil)
	}
	rb.use(body)
	if h.refuseAmbiguous(w, r, &rb) || h.negotiate(w, r, &rb) {
		return nil
	}
	// 4. Without a credential, only an edge-issued handshake session admits.
	var d *vc.Delegation
	var cred *carrier.Credential
	var proved, handled bool
	if len(found.Credentials) == 0 {
		d, err = h.sessionDelegation(r)
		if err != nil {
			return h.reject(w, r, err, nil)
		}
		if d == nil {
			if h.admitAnonymous(r, &rb) {
				// request_proof holds for anonymous tools too.
				if _, handled = h.admitProof(w, r, &rb, nil); handled {
					return nil
				}
				return h.serveProved(w, r, next, nil, &rb, observe.Decision{Outcome: "admitted", Reason: "anonymous", Status: http.StatusOK})
			}
			return h.reject(w, r, carrier.ErrNoCredential, nil)
		}
	} else {
		// 5. One verification path for every carrier and format.
		cred = &found.Credentials[0]
		if d, err = h.verify(r, cred.Raw, chain); err != nil {
			return h.reject(w, r, err, cred)
		}
		// A DPoP-bound credential, only with its proof (boundcredential.go).
		if err = h.checkBinding(r, cred, d); err != nil {
			return h.reject(w, r, err, cred)
		}
	}
	// The request proof, bound to the credential's (or the handshake
	// session's) subject.
	if proved, handled = h.admitProof(w, r, &rb, d); handled {
		return nil
	}

	// 6. The credential was for the edge; it does not travel on (unless
	// passthrough_credential). A proof-bearing body is never edited: its
	// proof covers everything outside _meta.
	if proved {
		h.carriers.RemoveHeaders(r)
	} else {
		h.carriers.Remove(r, found)
	}

	// 7. The host learns who is calling (Caddy: placeholders).
	h.setIdentity(r, d)

	if h.ident != nil {
		if err := h.ident.Inject(r, d); err != nil {
			return h.reject(w, r, err, cred)
		}
	}

	// 8. The audit log (observe.go) records the admission with its
	// carrier, unless the per-tool policy denies the request.
	carrierName := carrierSession
	if cred != nil {
		carrierName = cred.Carrier.String()
	}
	reason := "ok"
	if proved {
		reason = proofOK
	}
	return h.serveProved(w, r, next, d, &rb, observe.Decision{Outcome: "admitted", Reason: reason, Status: http.StatusOK, Delegation: d, Carrier: carrierName})
}

// serveAdmitted applies the per-tool policy to an admitted request (d is nil
// when it was admitted anonymously) and hands it on. A request has one
// decision: adm is recorded unless the policy recorded another one (a
// denied tools/call, or a body it could not read), so that a denial is
// not counted and logged as an admission too.
func (h *Handler) serveAdmitted(w http.ResponseWriter, r *http.Request, next Next, d *vc.Delegation, rb *rpcBody, adm observe.Decision) error {
	w, handled, recorded, err := h.enforcePolicy(w, r, d, rb, adm)
	if !recorded {
		h.obs.Decision(r, adm)
	}
	if handled {
		return err
	}
	err = next(w, r)
	finishResponse(w) // a checked answer without a body is sent as it came
	return err
}

// checksFor returns the verification rules for r: the configured ones plus
// the audiences, derived from the Host when none are configured. The slice
// is shared between requests (its capacity is its length, so a caller's
// append copies it): callers must not modify its elements.
func (h *Handler) checksFor(r *http.Request) []vc.CheckOption {
	if h.hostChecks != nil {
		return h.hostChecks.get(h.serviceHost(r))
	}
	return buildChecks(h.Audiences, h.serviceHost(r), h.checks)
}

// buildChecks is checksFor without the cache.
func buildChecks(configured []string, host string, checks []vc.CheckOption) []vc.CheckOption {
	auds := configured
	if len(auds) == 0 {
		auds = requestAudiences(host)
	}
	opts := make([]vc.CheckOption, 0, len(checks)+1)
	opts = append(opts, vc.ForAudience(auds...))
	opts = append(opts, checks...)
	return opts[:len(opts):len(opts)]
}

// maxCachedHosts bounds checkCache: the Host is the client's choice.
const maxCachedHosts = 64

// checkCache keeps checksFor's rules per Host, so that a request does not
// build its audiences and options again. Provision makes a new one, since
// the rules depend on the configuration. With configured audiences the
// rules do not depend on the Host and are built once.
type checkCache struct {
	configured []string
	checks     []vc.CheckOption
	fixed      []vc.CheckOption // with configured audiences

	mu     sync.RWMutex
	byHost map[string][]vc.CheckOption
}

func newCheckCache(configured []string, checks []vc.CheckOption) *checkCache {
	c := &checkCache{configured: configured, checks: checks}
	if len(configured) > 0 {
		c.fixed = buildChecks(configured, "", checks)
	}
	return c
}

func (c *checkCache) get(host string) []vc.CheckOption {
	if c.fixed != nil {
		return c.fixed
	}
	c.mu.RLock()
	opts, ok := c.byHost[host]
	c.mu.RUnlock()
	if ok {
		return opts
	}
	opts = buildChecks(nil, host, c.checks)
	c.mu.Lock()
	if len(c.byHost) >= maxCachedHosts || c.byHost == nil {
		// Many Hosts (or a client making them up): start over rather than
		// keep the first ones forever.
		c.byHost = make(map[string][]vc.CheckOption, maxCachedHosts)
	}
	c.byHost[host] = opts
	c.mu.Unlock()
	return opts
}

// requestAudiences are the names a credential may use for this host:
// did:web:<host> (the port's colon is %3A-encoded, as did:web requires),
// https://<host> and <host>. Hosts are case-insensitive, so lower-cased.
func requestAudiences(host string) []string {
	host = strings.ToLower(host)
	return []string{"did:web:" + strings.ReplaceAll(host, ":", "%3A"), "https://" + host, host}
}

// lastDerived keeps the last string derived from a request's host, so
// that a route serving one host derives it once rather than on every
// request; another host replaces it. Safe for concurrent use.
type lastDerived struct{ p atomic.Pointer[[2]string] } // host, derived

// get returns derive(host), from the last call when it was for host.
func (l *lastDerived) get(host string, derive func(string) string) string {
	if v := l.p.Load(); v != nil && v[0] == host {
		return v[1]
	}
	v := &[2]string{host, derive(host)}
	l.p.Store(v)
	return v[1]
}

// reject answers the request with the rejection for err and logs why, at
// Debug: a bad credential is the client's problem, not the operator's.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, err error, cred *carrier.Credential) error {
	rej := h.withAudiences(r, h.rejectionFor(err))
	dec := observe.Decision{Outcome: "rejected", Reason: rej.tag, Status: rej.status}
	if cred != nil {
		dec.Carrier = cred.Carrier.String()
	}
	h.obs.Decision(r, dec)
	if c := h.logger.Check(zapcore.DebugLevel, "request rejected"); c != nil {
		fields := []zap.Field{zap.Int("status", rej.status), zap.String("reason", rej.tag)}
		if cred != nil {
			// The issuer is read from the unverified credential: it tells the
			// operator whom to trust or ask, and is never the token itself.
			fields = append(fields, zap.String("carrier", cred.Carrier.String()), zap.String("issuer", observe.ClaimedIssuer(cred.Raw)))
		}
		c.Write(fields...)
	}
	h.writeRejection(w, r, rej)
	return nil
}

// carrierSession is the carrier of a decision admitted by a handshake
// session (edge session, or an upstream session bound at verify).
const carrierSession = "session"
