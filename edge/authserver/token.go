package authserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// CredentialIDPrefix starts the id of every credential the server issues;
// the refresh family follows it, then ":" and a random part.
const CredentialIDPrefix = "urn:mcpi-grant:"

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// readForm reads an urlencoded POST body of at most maxFormBody bytes, each
// parameter at most once (RFC 6749 §3.2).
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, string) {
	if r.Method != http.MethodPost {
		return nil, "use POST"
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return nil, "the body must be application/x-www-form-urlencoded"
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		return nil, "the form could not be read (at most 16 KiB)"
	}
	for k, vs := range r.PostForm {
		if len(vs) > 1 {
			return nil, k + " is given more than once"
		}
	}
	return r.PostForm, ""
}

// serveToken is the token endpoint: authorization_code (PKCE S256) and
// refresh_token grants, with DPoP binding when the client sends a proof.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	form, bad := readForm(w, r)
	if bad != "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", bad)
		return
	}
	switch form.Get("grant_type") {
	case "authorization_code":
		s.exchangeCode(w, r, form)
	case "refresh_token":
		s.refresh(w, r, form)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

func (s *Server) exchangeCode(w http.ResponseWriter, r *http.Request, form url.Values) {
	code := form.Get("code")
	if code == "" || len(code) > 64 {
		oauthError(w, http.StatusBadRequest, "invalid_request", "code is missing")
		return
	}
	// Consumed before anything else is checked: a code is tried once.
	rec, err := s.deps.Store.Consume(r.Context(), digest("oauth-code:", code))
	if errors.Is(err, challenge.ErrNonceNotFound) {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code is unknown, expired (60s) or already used: start the authorization again")
		return
	}
	if err != nil {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the shared store is unavailable; retry")
		return
	}
	var g grant
	if json.Unmarshal([]byte(rec.Challenge), &g) != nil || time.Now().After(rec.ExpiresAt) {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code expired: start the authorization again")
		return
	}
	switch {
	case form.Get("client_id") != g.ClientID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code was issued to another client")
		return
	case form.Has("redirect_uri") && form.Get("redirect_uri") != g.RedirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
		return
	case !pkceOK(form.Get("code_verifier"), g.Challenge):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge (PKCE S256)")
		return
	case form.Has("resource") && form.Get("resource") != g.Resource:
		oauthError(w, http.StatusBadRequest, "invalid_target", "resource differs from the authorization request's")
		return
	case s.issuer(r) != g.Origin:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code was issued on another origin")
		return
	}
	proof, ok := s.tokenDPoP(w, r, g.JKT)
	if !ok {
		return
	}
	if proof != nil {
		g.JKT = proof.JKT
	}
	g.Challenge = ""
	g.Family = randomToken()[:22]
	g.FamilyExpires = time.Now().Add(s.cfg.RefreshLifetime).Unix()
	if !s.startDelegation(w, r, g, proof) {
		return
	}
	s.issue(w, r, g, g.Scopes, proof)
}

// tokenDPoP checks the DPoP proof of a token request, when there is one or
// the grant is bound to a key (jkt). It has answered when ok is false.
func (s *Server) tokenDPoP(w http.ResponseWriter, r *http.Request, jkt string) (p *DPoPProof, ok bool) {
	hdr := r.Header.Values("DPoP")
	if len(hdr) == 0 {
		if jkt != "" {
			oauthError(w, http.StatusBadRequest, "invalid_dpop_proof", "this grant is bound to a DPoP key: send a DPoP proof")
			return nil, false
		}
		return nil, true
	}
	if s.deps.DPoP == nil {
		oauthError(w, http.StatusBadRequest, "invalid_dpop_proof", "this server does not accept DPoP proofs")
		return nil, false
	}
	if len(hdr) > 1 {
		oauthError(w, http.StatusBadRequest, "invalid_dpop_proof", "send exactly one DPoP header")
		return nil, false
	}
	got, err := s.deps.DPoP(r.Context(), hdr[0], http.MethodPost, s.issuer(r)+pathToken)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_dpop_proof", "the DPoP proof is invalid: "+err.Error())
		return nil, false
	}
	if jkt != "" && got.JKT != jkt {
		oauthError(w, http.StatusBadRequest, "invalid_dpop_proof", "the DPoP proof's key is not the key this grant is bound to")
		return nil, false
	}
	return &got, true
}

// issue answers a token request with a new credential for scopes and a new
// refresh token of g's family.
func (s *Server) issue(w http.ResponseWriter, r *http.Request, g grant, scopes []string, proof *DPoPProof) {
	ctx := r.Context()
	if rv, err := s.revoked.revoked(ctx, g.Family); err != nil || rv {
		if err != nil {
			oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the shared store is unavailable; retry")
			return
		}
		oauthError(w, http.StatusBadRequest, "invalid_grant", "this grant was revoked: authorize again")
		return
	}
	key, err := s.users.key(ctx, g.UserID, false)
	if err != nil {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the user's key could not be read; retry")
		return
	}
	agent := s.clientAgentDID(g.ClientID)
	tokenType := "Bearer"
	if g.JKT != "" {
		tokenType = "DPoP"
		if proof == nil {
			oauthError(w, http.StatusBadRequest, "invalid_dpop_proof", "send a DPoP proof")
			return
		}
		if agent, err = didresolver.JWKDID(proof.Key); err != nil {
			oauthError(w, http.StatusBadRequest, "invalid_dpop_proof", "the DPoP key cannot be named as a DID")
			return
		}
	}
	now := time.Now()
	exp := now.Add(s.cfg.CredentialLifetime)
	if fam := time.Unix(g.FamilyExpires, 0); exp.After(fam) {
		exp = fam
	}
	aud := []string{g.Resource}
	if g.EdgeAudience != "" && g.EdgeAudience != g.Resource {
		aud = append(aud, g.EdgeAudience)
	}
	user := userDID(g.Origin, g.UserID)
	tok, err := vc.IssueJWT(key, user+userKeyFragment, vc.Template{
		AgentDID: agent, UserDID: user, Audience: aud, Scopes: scopes, ExpiresAt: exp,
		ID: CredentialIDPrefix + g.Family + ":" + randomToken()[:16], DelegationID: g.Family, CnfJKT: g.JKT,
	})
	if err != nil {
		s.deps.Logger.Error("issuing credential", zapErr(err))
		oauthError(w, http.StatusInternalServerError, "server_error", "the credential could not be issued")
		return
	}
	refresh, err := s.newRefresh(r, g)
	if err != nil {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the shared store is unavailable; retry")
		return
	}
	s.event(r, Event{Kind: "issued", ClientID: g.ClientID, UserDID: user, AgentDID: agent, Scopes: scopes})
	body, _ := json.Marshal(tokenResponse{
		AccessToken: tok, TokenType: tokenType, ExpiresIn: int64(exp.Sub(now).Seconds()),
		RefreshToken: refresh, Scope: strings.Join(scopes, " "),
	})
	writeJSON(w, http.StatusOK, body, "no-store")
}

// refresh is the refresh_token grant: the token is spent, a new one of the
// same family is issued; a spent token presented again revokes the family.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, form url.Values) {
	ctx := r.Context()
	tok := form.Get("refresh_token")
	family, ok := s.refreshFamily(tok)
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is not one this server issued")
		return
	}
	rec, err := s.deps.Store.Consume(ctx, digest("oauth-rt:", tok))
	if errors.Is(err, challenge.ErrNonceNotFound) {
		// Authentic but spent (or its family expired): someone holds a
		// copy. Revoke every credential and refresh token of the family.
		if err := s.revoked.revoke(ctx, family, s.cfg.RefreshLifetime); err != nil {
			s.deps.Logger.Warn("refresh family not revoked", zapErr(err))
		}
		s.event(r, Event{Kind: "refresh_reused", ClientID: form.Get("client_id")})
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was already used: every token of this grant is revoked; authorize again")
		return
	}
	if err != nil {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the shared store is unavailable; retry")
		return
	}
	var g grant
	if json.Unmarshal([]byte(rec.Challenge), &g) != nil || g.Family != family {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is invalid")
		return
	}
	if form.Get("client_id") != g.ClientID {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was issued to another client")
		return
	}
	scopes := g.Scopes
	if sc := form.Get("scope"); sc != "" {
		scopes = nil
		for _, f := range strings.Fields(sc) {
			if !slices.Contains(g.Scopes, f) {
				oauthError(w, http.StatusBadRequest, "invalid_scope", "scope "+f+" was not granted; ask the user through the authorization endpoint")
				return
			}
			if !slices.Contains(scopes, f) {
				scopes = append(scopes, f)
			}
		}
	}
	proof, ok := s.tokenDPoP(w, r, g.JKT)
	if !ok {
		return
	}
	if g.JKT == "" && proof != nil {
		// A family made without DPoP stays unbound: the agent DID is
		// the client's, and binding it now would change who it names.
		proof = nil
	}
	s.issue(w, r, g, scopes, proof)
}

// Refresh tokens are <family>.<random>.<MAC>: the MAC lets the server
// tell a spent token of its own (reuse: revoke the family) from garbage.
func (s *Server) newRefresh(r *http.Request, g grant) (string, error) {
	head := g.Family + "." + randomToken()
	tok := head + "." + encodeMAC(mac(s.secrets.refresh, head))
	body, _ := json.Marshal(g)
	ttl := time.Until(time.Unix(g.FamilyExpires, 0))
	if ttl <= 0 {
		return "", nil
	}
	now := time.Now()
	rec := challenge.Record{Challenge: string(body), IssuedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.deps.Store.Put(r.Context(), digest("oauth-rt:", tok), rec, ttl); err != nil {
		return "", err
	}
	return tok, nil
}

func (s *Server) refreshFamily(tok string) (string, bool) {
	if len(tok) > 256 {
		return "", false
	}
	i := strings.LastIndexByte(tok, '.')
	if i < 0 {
		return "", false
	}
	head, sum := tok[:i], tok[i+1:]
	family, _, ok := strings.Cut(head, ".")
	if !ok || len(family) != 22 || !macEqual(sum, mac(s.secrets.refresh, head)) {
		return "", false
	}
	return family, true
}
