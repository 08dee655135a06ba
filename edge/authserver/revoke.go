package authserver

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
)

// serveRevoke is RFC 7009 revocation of a refresh token or a credential
// this server issued. Either revokes the whole family (every credential
// and refresh token renewed from the same consent). Holding a token is
// the authority to revoke it; an unknown token is answered 200 too, as
// RFC 7009 §2.2 asks.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	form, bad := readForm(w, r)
	if bad != "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", bad)
		return
	}
	tok := form.Get("token")
	if tok == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "token is missing")
		return
	}
	family, ok := s.refreshFamily(tok)
	if !ok {
		family, ok = s.credentialFamily(r, tok)
	}
	if ok {
		if err := s.revoked.revoke(r.Context(), family, s.cfg.RefreshLifetime); err != nil {
			oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the shared store is unavailable; retry")
			return
		}
		s.event(r, Event{Kind: "revoked", ClientID: form.Get("client_id")})
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// credentialFamily returns the family of a credential this server issued,
// checking its signature with the issuing user's key.
func (s *Server) credentialFamily(r *http.Request, tok string) (string, bool) {
	if len(tok) > 64<<10 {
		return "", false
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", false
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	var claims struct {
		Iss string `json:"iss"`
		VC  struct {
			CredentialSubject struct {
				Delegation struct {
					ID string `json:"id"`
				} `json:"delegation"`
			} `json:"credentialSubject"`
		} `json:"vc"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	pb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || readStrict(hb, &hdr, "alg", "kid") != nil || readStrict(pb, &claims, "iss", "vc") != nil || hdr.Alg != "EdDSA" {
		return "", false
	}
	id, ok := parseUserDID(claims.Iss)
	if !ok || hdr.Kid != claims.Iss+userKeyFragment {
		return "", false
	}
	key, err := s.users.key(r.Context(), id, false)
	if err != nil || !ed25519.Verify(key.Public().(ed25519.PublicKey), []byte(parts[0]+"."+parts[1]), sig) {
		return "", false
	}
	fam := claims.VC.CredentialSubject.Delegation.ID
	return fam, len(fam) == 22
}
