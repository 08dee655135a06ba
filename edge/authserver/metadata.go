package authserver

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// Discovery documents: the RFC 8414 metadata, at every path MCP clients
// probe for it (RFC 8414 path insertion, OpenID Connect discovery by
// insertion and by appending). The issuer is the site's origin, so each
// answers the same document.
const (
	wellKnownAS   = "/.well-known/oauth-authorization-server"
	wellKnownOIDC = "/.well-known/openid-configuration"
)

func isMetadataPath(p string) bool {
	for _, wk := range []string{wellKnownAS, wellKnownOIDC} {
		if p == wk || strings.HasPrefix(p, wk+"/") || strings.HasSuffix(p, wk) {
			return true
		}
	}
	return false
}

// IsDiscoveryPath reports whether p is one of the metadata paths the
// server answers, so that a host can tell discovery from a refused request.
func IsDiscoveryPath(p string) bool { return isMetadataPath(p) }

type metadata struct {
	Issuer                          string   `json:"issuer"`
	AuthorizationEndpoint           string   `json:"authorization_endpoint"`
	TokenEndpoint                   string   `json:"token_endpoint"`
	RegistrationEndpoint            string   `json:"registration_endpoint"`
	RevocationEndpoint              string   `json:"revocation_endpoint"`
	ResponseTypes                   []string `json:"response_types_supported"`
	ResponseModes                   []string `json:"response_modes_supported"`
	GrantTypes                      []string `json:"grant_types_supported"`
	CodeChallengeMethods            []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethods        []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethods   []string `json:"revocation_endpoint_auth_methods_supported"`
	ScopesSupported                 []string `json:"scopes_supported"`
	ClientIDMetadataDocumentSupport bool     `json:"client_id_metadata_document_supported"`
	AuthorizationResponseIssSupport bool     `json:"authorization_response_iss_parameter_supported"`
	DPoPSigningAlgValues            []string `json:"dpop_signing_alg_values_supported,omitempty"`
	ResourceIndicatorsSupported     bool     `json:"resource_indicators_supported"`
	RequestParameterSupported       bool     `json:"request_parameter_supported"`
	RequestURIParameterSupported    bool     `json:"request_uri_parameter_supported"`
	PushedAuthorizationRequestsReqd bool     `json:"require_pushed_authorization_requests"`
}

// ScopesSupported is the sorted list of the route's scopes.
func (s *Server) ScopesSupported() []string {
	out := make([]string, 0, len(s.scopes))
	for name := range s.scopes {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	iss := s.issuer(r)
	md := metadata{
		Issuer:                          iss,
		AuthorizationEndpoint:           iss + pathAuthorize,
		TokenEndpoint:                   iss + pathToken,
		RegistrationEndpoint:            iss + pathRegister,
		RevocationEndpoint:              iss + pathRevoke,
		ResponseTypes:                   []string{"code"},
		ResponseModes:                   []string{"query"},
		GrantTypes:                      []string{"authorization_code", "refresh_token"},
		CodeChallengeMethods:            []string{"S256"},
		TokenEndpointAuthMethods:        []string{"none"},
		RevocationEndpointAuthMethods:   []string{"none"},
		ScopesSupported:                 s.ScopesSupported(),
		ClientIDMetadataDocumentSupport: s.deps.FetchClient != nil,
		AuthorizationResponseIssSupport: true,
		ResourceIndicatorsSupported:     true,
	}
	if s.deps.DPoP != nil {
		md.DPoPSigningAlgValues = []string{"EdDSA", "ES256"}
	}
	body, _ := json.Marshal(md)
	w.Header().Add("Vary", "Host")
	writeJSON(w, http.StatusOK, body, "public, max-age=300")
}

func writeJSON(w http.ResponseWriter, status int, body []byte, cacheControl string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", cacheControl)
	if cacheControl == "no-store" {
		h.Set("Pragma", "no-cache")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use "+allow)
}

// oauthError writes an RFC 6749 §5.2 error response.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	body, _ := json.Marshal(struct {
		Error       string `json:"error"`
		Description string `json:"error_description,omitempty"`
	}{code, desc})
	writeJSON(w, status, body, "no-store")
}
