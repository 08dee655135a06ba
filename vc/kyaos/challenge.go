package kyaos

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Challenge is a needs_authorization step-up (docs/protocol/kyaos.md#signed-consent-challenge): the tool called
// needs a delegation with ScopeID, to be granted at AuthorizationURL.
type Challenge struct {
	Tool    string
	ScopeID string
	// Scopes are every scope the consent must grant; default [ScopeID].
	Scopes           []string
	AuthorizationURL string
	// ResumeToken is the edge's single-use token for the retry
	// (NewResumeToken); ExpiresAt its end, epoch seconds.
	ResumeToken string
	ExpiresAt   int64
}

// NewResumeToken is 16 random bytes as lowercase hex in 8-4-4-4-12 groups,
// the reference's form.
func NewResumeToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Message is the challenge's human text, as the reference words it.
func (c Challenge) Message() string {
	return `Tool "` + c.Tool + `" requires delegation with scope: ` + strings.Join(c.scopes(), ", ")
}

func (c Challenge) scopes() []string {
	if len(c.Scopes) > 0 {
		return c.Scopes
	}
	return []string{c.ScopeID}
}

// SignChallenge returns the JSON-RPC result answering request with the
// signed challenge: resultType "complete", the NeedsAuthorizationError in
// content (so the consent URL is covered by responseHash under either
// profile), and a response proof with outcome needs_authorization.
func (s ResponseSigner) SignChallenge(request []byte, audience string, c Challenge, now int64) ([]byte, error) {
	body, err := json.Marshal(struct {
		Error            string   `json:"error"`
		Message          string   `json:"message"`
		AuthorizationURL string   `json:"authorizationUrl"`
		ResumeToken      string   `json:"resumeToken"`
		ExpiresAt        int64    `json:"expiresAt"`
		Scopes           []string `json:"scopes"`
	}{"needs_authorization", c.Message(), c.AuthorizationURL, c.ResumeToken, c.ExpiresAt, c.scopes()})
	if err != nil {
		return nil, err
	}
	result, err := json.Marshal(map[string]any{
		"resultType": "complete",
		"content":    []map[string]string{{"type": "text", "text": string(body)}},
	})
	if err != nil {
		return nil, err
	}
	return s.SignResult(result, request, audience, ResponseMeta{
		Outcome: OutcomeNeedsAuthorization, Reason: c.Message(), ScopeID: c.ScopeID,
	}, now)
}
