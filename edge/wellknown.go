package edge

import (
	"net/http"
	"time"

	"go.uber.org/zap"
)

// wellKnownJWKS is where the edge publishes the keys of its assertions.
const wellKnownJWKS = "/.well-known/jwks.json"

// serveLevel2 answers the edge's own Level 2 documents and reports whether
// it did. Runs after the identity headers were stripped and before any
// credential is required, only at level 2 and 3:
//
//   - GET /.well-known/jwks.json: the public half of every key a verifier
//     may still need (the current key, and rotated-out keys until every
//     assertion they signed has expired), kid "<edge DID>#<thumbprint>".
//   - GET /.well-known/did.json (or /<path>/did.json for a configured
//     did:web:<host>:<path> edge_did): the did:web document with the same
//     keys (and, at level 3, the handshake service), so did:web resolvers
//     find them too. Not served when edge_did is of another method.
//
// The edge DID of both is the configured edge_did, else did:web:<Host>. The
// mcpi handler must see these paths: put it on a route that matches them.
func (h *Handler) serveLevel2(w http.ResponseWriter, r *http.Request) (handled bool, err error) {
	rt := h.l2.rt
	if rt == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false, nil
	}
	isJWKS := r.URL.Path == wellKnownJWKS
	if !isJWKS && (rt.didDocPath == "" || r.URL.Path != rt.didDocPath) {
		return false, nil
	}
	did, err := rt.edgeDID(h.serviceHost(r))
	if err != nil {
		return true, httpError(http.StatusBadRequest, err)
	}
	rt.refreshForPublish(r.Context())
	ks, now := rt.ks.Load(), time.Now()
	var body []byte
	if isJWKS {
		body, err = ks.JWKS(did, now)
	} else {
		// At level 3 the document also announces the handshake endpoints.
		body, err = ks.DIDDocument(did, now, h.handshakeServices(r, did)...)
	}
	if err != nil {
		rt.logger.Error("rendering the edge's keys failed", zap.String("path", r.URL.Path), zap.Error(err))
		return true, httpError(http.StatusInternalServerError, errEdgeIdentity)
	}
	// Short-lived: a verifier that meets an unknown kid refetches anyway,
	// and a retired key must not outlive its retention in caches for long.
	writeJSON(w, http.StatusOK, body, "public, max-age=60")
	return true, nil
}
