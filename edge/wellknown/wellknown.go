// Package wellknown serves the documents the edge publishes without a
// credential, since they are how a client learns what to present: the
// RFC 9728 protected resource metadata, the KYA-OS server document
// (/.well-known/mcp), the MCP-I handshake document
// (/.well-known/mcp-i.json) and, from Level 2, the edge's JWKS and
// did.json (built by edge/identity). A document the configuration does not
// call for is left to the upstream.
package wellknown

import (
	"errors"
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/internal/reply"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
)

// Documents are the edge's documents for one configuration. Nil parts are
// not served.
type Documents struct {
	Site     *site.Site
	Resource Resource
	// MCP is the KYA-OS server document, set when the edge enforces the
	// extension.
	MCP *MCP
	// Handshake is the Level 3 handshake document, set at level 3.
	Handshake *Handshake
	// Identity builds the edge's JWKS and did.json (Level 2 and 3).
	Identity *identity.Identity
}

// ErrNoHost and ErrUnavailable are the failures of Serve: a request
// without a Host asked for a document derived from it (400), or the edge's
// keys could not be read (500).
var (
	ErrNoHost      = identity.ErrNoHost
	ErrUnavailable = identity.ErrUnavailable
)

// Serve answers r when it asks for one of the documents, and reports
// whether it did. A failure is returned, not written: handled is then true
// and the caller answers with the error's status.
func (d *Documents) Serve(w http.ResponseWriter, r *http.Request) (handled bool, err error) {
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	p := r.URL.Path
	switch {
	case get && site.IsResourceMetadataPath(p):
		d.Resource.serve(w, r, d.Site)
		return true, nil
	case get && p == WellKnownMCP && d.MCP != nil:
		d.MCP.serve(w, r, d.Site)
		return true, nil
	}
	if d.Identity != nil {
		body, handled, err := d.Identity.WellKnown(r)
		switch {
		case !handled:
		case errors.Is(err, identity.ErrNoHost):
			return true, err
		case err != nil:
			return true, ErrUnavailable
		default:
			// The DID, key ids and handshake URLs are the Host's unless
			// edge_did fixes the DID; even then a level 3 did.json names
			// the Host's URLs.
			reply.VaryHost(w)
			reply.JSON(w, http.StatusOK, body, "public, max-age=60")
			return true, nil
		}
	}
	if get && p == WellKnownMCPI && d.Handshake != nil {
		d.Handshake.serve(w, r, d.Site)
		return true, nil
	}
	return false, nil
}

// Services are the did.json service entries that announce the Level 3
// handshake for r; nil below level 3.
func (d *Documents) Services(r *http.Request, edgeDID string) []assertion.Service {
	if d.Handshake == nil {
		return nil
	}
	return d.Handshake.Services(r, d.Site, edgeDID)
}
