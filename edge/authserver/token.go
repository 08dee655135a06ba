package authserver

import (
	"context"
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
	// The code is spent: no answer from here on invites a retry with it.
	if !s.startDelegation(w, r, g, proof) {
		return
	}
	cred, terr := s.mint(r.Context(), g, g.Scopes, proof)
	if terr != nil {
		if terr.status == http.StatusServiceUnavailable {
			terr = &tokenErr{terr.status, terr.code, "the credential could not be issued and the code is spent: start the authorization again"}
		}
		terr.write(w)
		return
	}
	refresh, err := s.newRefresh(r, g)
	if err != nil {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the shared store is unavailable and the code is spent: start the authorization again")
		return
	}
	s.send(w, r, g, cred, refresh)
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

// issued is a signed credential not yet sent.
type issued struct {
	token, tokenType, user, agent string
	scopes                        []string
	exp, now                      time.Time
}

// tokenErr is a token endpoint error answer.
type tokenErr struct {
	status     int
	code, desc string
}

func (e *tokenErr) write(w http.ResponseWriter) { oauthError(w, e.status, e.code, e.desc) }

var errStoreRetry = &tokenErr{http.StatusServiceUnavailable, "temporarily_unavailable", "the shared store is unavailable; retry"}

// mint checks that g's family is not revoked and signs a credential for
// scopes. It spends nothing, so its errors may invite a retry.
func (s *Server) mint(ctx context.Context, g grant, scopes []string, proof *DPoPProof) (issued, *tokenErr) {
	if rv, err := s.revoked.revoked(ctx, g.Family); err != nil || rv {
		if err != nil {
			return issued{}, errStoreRetry
		}
		return issued{}, &tokenErr{http.StatusBadRequest, "invalid_grant", "this grant was revoked: authorize again"}
	}
	key, err := s.users.key(ctx, g.UserID, false)
	if err != nil {
		return issued{}, &tokenErr{http.StatusServiceUnavailable, "temporarily_unavailable", "the user's key could not be read; retry"}
	}
	out := issued{agent: s.clientAgentDID(g.ClientID), tokenType: "Bearer", scopes: scopes, now: time.Now()}
	if g.JKT != "" {
		out.tokenType = "DPoP"
		if proof == nil {
			return issued{}, &tokenErr{http.StatusBadRequest, "invalid_dpop_proof", "send a DPoP proof"}
		}
		if out.agent, err = didresolver.JWKDID(proof.Key); err != nil {
			return issued{}, &tokenErr{http.StatusBadRequest, "invalid_dpop_proof", "the DPoP key cannot be named as a DID"}
		}
	}
	out.exp = out.now.Add(s.cfg.CredentialLifetime)
	if fam := time.Unix(g.FamilyExpires, 0); out.exp.After(fam) {
		out.exp = fam
	}
	aud := []string{g.Resource}
	if g.EdgeAudience != "" && g.EdgeAudience != g.Resource {
		aud = append(aud, g.EdgeAudience)
	}
	out.user = userDID(g.Origin, g.UserID)
	out.token, err = vc.IssueJWT(key, out.user+userKeyFragment, vc.Template{
		AgentDID: out.agent, UserDID: out.user, Audience: aud, Scopes: scopes, ExpiresAt: out.exp,
		ID: CredentialIDPrefix + g.Family + ":" + randomToken()[:16], DelegationID: g.Family, CnfJKT: g.JKT,
	})
	if err != nil {
		s.deps.Logger.Error("issuing credential", zapErr(err))
		return issued{}, &tokenErr{http.StatusInternalServerError, "server_error", "the credential could not be issued"}
	}
	return out, nil
}

// send answers a token request with the credential and refresh token.
func (s *Server) send(w http.ResponseWriter, r *http.Request, g grant, c issued, refresh string) {
	s.event(r, Event{Kind: "issued", ClientID: g.ClientID, UserDID: c.user, AgentDID: c.agent, Scopes: c.scopes})
	body, _ := json.Marshal(tokenResponse{
		AccessToken: c.token, TokenType: c.tokenType, ExpiresIn: int64(c.exp.Sub(c.now).Seconds()),
		RefreshToken: refresh, Scope: strings.Join(c.scopes, " "),
	})
	writeJSON(w, http.StatusOK, body, "no-store")
}

// refresh is the refresh_token grant: the token is spent, a new one of the
// same family is issued; a spent token presented again revokes the family.
// Everything that can be checked is checked before the token is spent
// (with a store that can read without consuming), so that a refused
// refresh leaves it usable; without such a store, a refused refresh puts
// the token back. Either way no answer invites a retry with a spent token.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, form url.Values) {
	ctx := r.Context()
	tok := form.Get("refresh_token")
	family, ok := s.refreshFamily(tok)
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is not one this server issued")
		return
	}
	key := digest("oauth-rt:", tok)
	rec, peeked, err := s.peek(ctx, key)
	if !peeked && err == nil {
		rec, err = s.deps.Store.Consume(ctx, key)
	}
	if errors.Is(err, challenge.ErrNonceNotFound) {
		s.refreshReused(w, r, form, family)
		return
	}
	if err != nil {
		errStoreRetry.write(w)
		return
	}
	// unspend undoes a consume-first spend before a refusal.
	unspend := func() {
		if !peeked {
			s.restore(ctx, key, rec)
		}
	}
	var g grant
	if json.Unmarshal([]byte(rec.Challenge), &g) != nil || g.Family != family {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is invalid")
		return
	}
	scopes, terr := refreshScopes(form, g)
	if terr != nil {
		unspend()
		terr.write(w)
		return
	}
	proof, ok := s.tokenDPoP(w, r, g.JKT)
	if !ok {
		unspend()
		return
	}
	if g.JKT == "" && proof != nil {
		// A family made without DPoP stays unbound: the agent DID is
		// the client's, and binding it now would change who it names.
		proof = nil
	}
	cred, terr := s.mint(ctx, g, scopes, proof)
	if terr != nil {
		unspend()
		terr.write(w)
		return
	}
	if peeked {
		got, err := s.deps.Store.Consume(ctx, key)
		if errors.Is(err, challenge.ErrNonceNotFound) {
			// Spent since the peek: another holder used it first.
			s.refreshReused(w, r, form, family)
			return
		}
		if err != nil {
			errStoreRetry.write(w)
			return
		}
		if got.Challenge != rec.Challenge {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is invalid")
			return
		}
	}
	next, err := s.newRefresh(r, g)
	if err != nil {
		if s.restore(ctx, key, rec) {
			errStoreRetry.write(w)
			return
		}
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable",
			"the shared store failed after this refresh token was spent: do not retry with it; authorize again")
		return
	}
	s.send(w, r, g, cred, next)
}

// refreshScopes are the scopes a refresh asks for: the granted ones, or a
// narrower set; it is refused, as RFC 6749 §6 says, when it names another
// client or a scope not granted.
func refreshScopes(form url.Values, g grant) ([]string, *tokenErr) {
	if form.Get("client_id") != g.ClientID {
		return nil, &tokenErr{http.StatusBadRequest, "invalid_grant", "the refresh token was issued to another client"}
	}
	sc := form.Get("scope")
	if sc == "" {
		return g.Scopes, nil
	}
	var scopes []string
	for _, f := range strings.Fields(sc) {
		if !slices.Contains(g.Scopes, f) {
			return nil, &tokenErr{http.StatusBadRequest, "invalid_scope", "scope " + f + " was not granted; ask the user through the authorization endpoint"}
		}
		if !slices.Contains(scopes, f) {
			scopes = append(scopes, f)
		}
	}
	return scopes, nil
}

// refreshReused answers an authentic refresh token that is spent (or whose
// family expired): someone holds a copy. Every credential and refresh
// token of the family is revoked.
func (s *Server) refreshReused(w http.ResponseWriter, r *http.Request, form url.Values, family string) {
	if err := s.revoked.revoke(r.Context(), family, s.cfg.RefreshLifetime); err != nil {
		s.deps.Logger.Warn("refresh family not revoked", zapErr(err))
	}
	s.event(r, Event{Kind: "refresh_reused", ClientID: form.Get("client_id")})
	oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was already used: every token of this grant is revoked; authorize again")
}

// peek reads the record under key without spending it, when the store
// can; peeked is false when it cannot.
func (s *Server) peek(ctx context.Context, key string) (rec challenge.Record, peeked bool, err error) {
	p, ok := s.deps.Store.(challenge.Peeker)
	if !ok {
		return rec, false, nil
	}
	rec, err = p.Peek(ctx, key)
	if errors.Is(err, errors.ErrUnsupported) {
		return rec, false, nil
	}
	return rec, true, err
}

// restore puts a spent refresh token's record back for the rest of its
// life; it reports whether the token is usable again.
func (s *Server) restore(ctx context.Context, key string, rec challenge.Record) bool {
	ttl := time.Until(rec.ExpiresAt)
	if ttl <= 0 {
		return false
	}
	err := s.deps.Store.Put(ctx, key, rec, ttl)
	if err != nil {
		s.deps.Logger.Warn("spent refresh token not restored", zapErr(err))
	}
	return err == nil
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
