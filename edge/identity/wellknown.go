package identity

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
)

// JWKSPath is where the edge publishes the keys of its assertions.
const JWKSPath = "/.well-known/jwks.json"

// WellKnown renders the edge's own Level 2 documents; handled is false for
// every other request. The caller serves body as JSON (cacheable for a
// minute: a verifier that meets an unknown kid refetches anyway, and a
// retired key must not outlive its retention in caches for long). It runs
// after the identity headers were stripped and before any credential is
// required:
//
//   - GET /.well-known/jwks.json: the public half of every key a verifier
//     may still need (the current key, and rotated-out keys until every
//     assertion they signed has expired), kid "<edge DID>#<thumbprint>".
//   - GET /.well-known/did.json (or /<path>/did.json for a configured
//     did:web:<host>:<path> edge_did): the did:web document with the same
//     keys (and the services of WithServices), so did:web resolvers find
//     them too. Not served when edge_did is of another method.
//
// The edge DID of both is the configured edge_did, else did:web:<Host>. The
// errors are ErrNoHost (the client's) and ErrUnavailable.
func (id *Identity) WellKnown(r *http.Request) (body []byte, handled bool, err error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, false, nil
	}
	isJWKS := r.URL.Path == JWKSPath
	if !isJWKS && (id.didDocPath == "" || r.URL.Path != id.didDocPath) {
		return nil, false, nil
	}
	did, err := id.edgeDID(id.host(r))
	if err != nil {
		return nil, true, err
	}
	id.refreshForPublish(r.Context())
	ks, now := id.ks.Load(), time.Now()
	if isJWKS {
		body, err = ks.JWKS(did, now)
	} else {
		var services []assertion.Service
		if id.services != nil {
			services = id.services(r, did)
		}
		body, err = ks.DIDDocument(did, now, services...)
	}
	if err != nil {
		id.logger.Error("rendering the edge's keys failed", zap.String("path", r.URL.Path), zap.Error(err))
		return nil, true, ErrUnavailable
	}
	return body, true, nil
}
