package edge

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/level3"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proofstep"
	"github.com/mcpi-edge/caddy-mcpi/edge/toolpolicy"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// ServeNext admits the request if it carries a valid delegation credential
// (or a Level 3 session, or calls only anonymous tools), with its request
// proof where one is required; the numbered steps below are documented in
// docs/config/request.md, and docs/architecture.md says which file or
// package each is in. A step that says no returns a refusal, which refuse
// writes; handOn installs the response chain and records the admission.
func (h *Handler) ServeNext(w http.ResponseWriter, r *http.Request, next Next) error {
	// 1. Identity headers are the edge's to set; a client's are lies.
	r = h.policy.NoteKYAAccept(r) // an opt-in among the kya-* names (edge/toolpolicy)
	h.carriers.StripIdentity(r)
	// The ancestors of a chain are read now and never travel on.
	chain := h.carriers.TakeChain(r)

	// 2. The edge's documents (edge/wellknown) are how a client learns
	// what to present, so they need no credential.
	if handled, err := h.docs.Serve(w, r); handled {
		return documentError(err)
	}
	// 2b. The front door (frontdoor.go): OAuth metadata, registration,
	// consent, tokens, revocation and the users' DID documents.
	// Its endpoints need no credential and are not decisions about a
	// request, so they are not audited as ones.
	if h.front != nil && h.front.Serve(w, r) {
		return nil
	}
	// 2c. Level 3 handshake calls (edge/level3): answered or proxied.
	if h.l3 != nil {
		res, err := h.l3.Serve(w, r, next, chain)
		if err != nil {
			return hostError(err) // the upstream's, or a handshake upstream's failure
		}
		switch res.Outcome {
		case level3.Answered:
			writeAnswer(w, res.Answer)
			return nil
		case level3.Refused:
			return h.refuse(w, r, res.Err, nil)
		case level3.PassOn:
			return next(w, r)
		}
	}

	// 3. An MCP POST is JSON (mediatype.go); then every enabled carrier.
	if notJSONPost(r) {
		return h.refuse(w, r, errNotJSONMediaType, nil)
	}
	found, err := h.carriers.Find(w, r)
	if err != nil && (!h.policy.PerTool() || err != carrier.ErrBodyNotJSON) {
		// A tool policy reads every body and refuses what is not JSON
		// itself (its 400 or 415), after the credential.
		return h.refuse(w, r, err, nil)
	}
	// The one strict reading of the JSON-RPC body, shared by every step
	// that decides on it (edge/framing).
	var rb framing.Body
	// MCP framing (edge/framing, 2026-07-28): headers that disagree with the
	// body stop here, before any credential or policy decision.
	if err := h.framing.Check(w, r, &found, &rb); err != nil {
		return h.refuse(w, r, err, nil)
	}
	if found.Conflicting() {
		return h.refuse(w, r, carrier.ErrConflict, &found.Credentials[0])
	}
	if found.ForeignBearer && h.cfg.NonDelegationBearer == BearerReject {
		return h.refuse(w, r, carrier.ErrForeignBearer, nil)
	}
	// KYA-OS (edge/proofstep): the declaration gate comes before admission.
	body, err := h.proofs.ReadBody(w, r, &found)
	if err != nil {
		return h.refuse(w, r, err, nil)
	}
	rb.Use(body)
	if err := h.framing.CheckAmbiguous(&rb); err != nil {
		return h.refuse(w, r, err, nil)
	}
	if err := h.proofs.Negotiate(r, &rb); err != nil {
		return h.refuse(w, r, err, nil)
	}
	// 4. Without a credential, only an edge-issued handshake session admits.
	var d *vc.Delegation
	var cred *carrier.Credential
	var proved bool
	if len(found.Credentials) == 0 {
		if h.l3 != nil {
			if d, err = h.l3.Session(r); err != nil {
				return h.refuse(w, r, err, nil)
			}
		}
		if d == nil {
			if h.policy.AdmitAnonymous(r, &rb) {
				// request_proof holds for anonymous tools too.
				if _, err := h.proofs.Admit(r, &rb, nil); err != nil {
					return h.refuse(w, r, err, nil)
				}
				return h.handOn(w, r, next, nil, &rb, observe.Decision{Outcome: "admitted", Reason: "anonymous", Status: http.StatusOK})
			}
			return h.refuse(w, r, carrier.ErrNoCredential, nil)
		}
	} else {
		// 5. One verification path for every carrier and format
		// (edge/admit).
		cred = &found.Credentials[0]
		if d, err = h.admit.Verify(r, cred.Raw, chain); err != nil {
			return h.refuse(w, r, err, cred)
		}
		// A DPoP-bound credential, only with its proof (boundcredential.go).
		if err = h.admit.CheckBinding(r, cred, d); err != nil {
			return h.refuse(w, r, err, cred)
		}
	}
	carrierName := toolpolicy.CarrierSession
	if cred != nil {
		carrierName = cred.Carrier.String()
	}
	// The request proof, bound to the credential's (or the handshake
	// session's) subject. The rate limits are taken between its
	// signatures and its nonce's write (toolpolicy/ratelimit_proof.go).
	r, limited := h.policy.LimitAtProof(r, d, &rb, carrierName)
	if proved, err = h.proofs.Admit(r, &rb, d); err != nil {
		if limited != nil && *limited != nil {
			err = *limited
		}
		return h.refuse(w, r, err, nil)
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
			return h.refuse(w, r, err, cred)
		}
	}

	// 8. The tool policy and the upstream (handOn); the audit log records
	// the admission with its carrier unless the policy refuses.
	reason := "ok"
	if proved {
		reason = proofstep.ReasonProofOK
	}
	return h.handOn(w, r, next, d, &rb, observe.Decision{Outcome: "admitted", Reason: reason, Status: http.StatusOK, Delegation: d, Carrier: carrierName})
}

// handOn serves an admitted request (d is nil when it was admitted
// anonymously): it installs the response chain, in this one place, and
// hands the request on. The chain, outermost first: the proof step's
// signing of the answer (and its declaration of the extension), its
// memory of the session's declaration, then the tool policy's check of
// the answer (list filtering, consent URLs). Neither buffers an SSE
// stream. A request has one decision, recorded here: adm, or the policy's
// in its place (naming the tools called); a refusal carries its own.
func (h *Handler) handOn(w http.ResponseWriter, r *http.Request, next Next, d *vc.Delegation, rb *framing.Body, adm observe.Decision) error {
	w, finish := h.proofs.Wrap(w, r, rb.Raw(), d)
	v, err := h.policy.Check(w, r, d, rb, adm)
	if err != nil {
		_ = h.refuse(w, r, err, nil)
		return finish() // the refusal went through the proof step's writer
	}
	if v.Decision != nil {
		adm = *v.Decision
	}
	h.obs.Decision(r, adm)
	pw := h.policy.Wrap(w, r, v)
	err = next(pw, r)
	toolpolicy.Finish(pw) // a checked answer without a body is sent as it came
	if err != nil {
		return err
	}
	return finish()
}
