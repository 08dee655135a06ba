package authserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// grant is what a consent granted: kept under the authorization code, then
// under each refresh token of its family. It names the user by opaque id,
// never by login subject.
type grant struct {
	ClientID      string   `json:"c"`
	RedirectURI   string   `json:"r"`
	Challenge     string   `json:"p,omitempty"` // PKCE S256 code_challenge (codes only)
	UserID        string   `json:"u"`
	Scopes        []string `json:"s"`
	Resource      string   `json:"a"`
	Origin        string   `json:"o"`
	EdgeAudience  string   `json:"e,omitempty"`
	JKT           string   `json:"k,omitempty"` // DPoP key the family is bound to
	Family        string   `json:"f,omitempty"`
	FamilyExpires int64    `json:"x,omitempty"` // Unix seconds
}

// pkceOK checks an RFC 7636 S256 verifier against challenge.
func pkceOK(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 || strings.Trim(verifier, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") != "" {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

// validChallenge: an S256 challenge is 43 base64url characters.
func validChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil
}
