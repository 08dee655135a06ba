package authserver

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// registerRequest is the part of an RFC 7591 request the server reads;
// other members are ignored, as RFC 7591 §2 asks.
type registerRequest struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
}

var registerMembers = []string{"redirect_uris", "client_name", "token_endpoint_auth_method", "grant_types", "response_types"}

type registerResponse struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
}

// serveRegister is RFC 7591 dynamic registration, for public clients only.
// It writes nothing: the client_id is the registration (client.go).
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBody))
	if err != nil {
		oauthError(w, http.StatusRequestEntityTooLarge, "invalid_client_metadata", "registration is larger than 16 KiB")
		return
	}
	var req registerRequest
	if err := readStrict(body, &req, registerMembers...); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body must be one JSON object without repeated or case-variant member names")
		return
	}
	if desc := checkRegistration(&req); desc != "" {
		code := "invalid_client_metadata"
		if len(req.RedirectURIs) == 0 || desc == errBadRedirect.Error() {
			code = "invalid_redirect_uri"
		}
		oauthError(w, http.StatusBadRequest, code, desc)
		return
	}
	now := time.Now()
	reg := registrationAt(req.RedirectURIs, req.ClientName, now)
	id := s.newClientID(reg)
	out, _ := json.Marshal(registerResponse{
		ClientID: id, ClientIDIssuedAt: now.Unix(), ClientName: req.ClientName,
		RedirectURIs: req.RedirectURIs, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
	})
	s.event(r, Event{Kind: "registration", ClientID: id})
	writeJSON(w, http.StatusCreated, out, "no-store")
}

// checkRegistration returns what is wrong with req, "" when nothing is.
func checkRegistration(req *registerRequest) string {
	switch req.TokenEndpointAuthMethod {
	case "", "none":
	default:
		return "only public clients are registered: token_endpoint_auth_method must be none (PKCE protects the code)"
	}
	if len(req.RedirectURIs) == 0 || len(req.RedirectURIs) > maxRedirectURIs {
		return "redirect_uris must list 1 to 5 URIs"
	}
	for _, u := range req.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return err.Error()
		}
	}
	for _, g := range req.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return "grant_types may hold authorization_code and refresh_token only"
		}
	}
	for _, t := range req.ResponseTypes {
		if t != "code" {
			return "response_types may hold code only"
		}
	}
	if err := checkClientName(req.ClientName); err != nil {
		return err.Error()
	}
	return ""
}
