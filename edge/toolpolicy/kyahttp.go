package toolpolicy

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// draft-kya-http-02, as the KYA-OS reference server negotiates it: with
// the front door's kya_http on, a single tools/call refused for missing
// scopes, from a caller that asked for the challenge, is answered at the
// HTTP level instead of with the MCP prompt. A Signature-Input with a kya
// label asks for the 401 (WWW-Authenticate: Delegation … beside Bearer
// resource_metadata, Retry-After); KYA-Accept-Challenge for the same body
// as a 200 envelope with hint headers. The agent shows consent_uri to its
// user, polls pickup_uri (edge/authserver kyapickup.go) until the
// delegation is ready, and retries with it. Anything else gets the MCP
// prompt as before.

// kyaAcceptKey marks, in the request's context, a caller that sent
// KYA-Accept-Challenge: the header is a kya-* name, which the edge's first
// step strips with every other before anything reads it, so the edge
// notes it (NoteKYAAccept) before that.
type kyaAcceptKey struct{}

// NoteKYAAccept remembers KYA-Accept-Challenge (any non-empty value) on a
// route that offers the challenge.
func (p *Policy) NoteKYAAccept(r *http.Request) *http.Request {
	if p.parts.Front == nil || !p.parts.Front.KYAHTTP() || r.Header.Get("KYA-Accept-Challenge") == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), kyaAcceptKey{}, true))
}

// kyaChallengeBody is the challenge's JSON body.
type kyaChallengeBody struct {
	Error string `json:"error"`
	KYAOS struct {
		SID            string   `json:"sid"`
		ConsentURI     string   `json:"consent_uri"`
		PickupURI      string   `json:"pickup_uri"`
		RequiredScopes []string `json:"required_scopes"`
		PollIntervalS  int      `json:"poll_interval_s"`
		ChallengeProof string   `json:"challenge_proof"`
	} `json:"kyaos"`
	Instructions string `json:"instructions"`
}

const kyaInstructions = "This action requires human authorization. Generate one random 32-byte token (base64url, unpadded), show consent_uri to the user, and poll pickup_uri with the token in X-KYA-Pickup-Token every poll_interval_s seconds until the status is ready; then retry the request with Authorization: Bearer <delegation> (or KYA-Delegation when Authorization holds an OAuth token)."

// kyaHTTP is the answer to a request of one denied tools/call with the
// draft-kya-http-02 challenge, when the route offers it and the caller
// asked for it; nil otherwise. It carries the denial as its decision.
func (p *Policy) kyaHTTP(r *http.Request, msgs []mcp.Message, batch bool, decisions []mcp.Decision, d *vc.Delegation, adm observe.Decision) *refusal.Refusal {
	if batch || len(msgs) != 1 || msgs[0].Method != mcp.MethodToolsCall {
		return nil
	}
	rf := p.kyaHTTPChallenge(r, msgs[0], decisions[0], d)
	if rf == nil {
		return nil
	}
	rf.Decision = denialDecision(msgs, decisions, adm, rf.Status)
	return rf
}

// kyaHTTPChallenge is the challenge for the denied call m, or nil when it
// does not apply.
func (p *Policy) kyaHTTPChallenge(r *http.Request, m mcp.Message, dec mcp.Decision, d *vc.Delegation) *refusal.Refusal {
	if dec.Allowed || p.parts.Front == nil || !p.parts.Front.KYAHTTP() || d == nil || dec.Reason != mcp.ReasonInsufficientScope || len(dec.Missing) == 0 {
		return nil
	}
	fetcher, _ := r.Context().Value(kyaAcceptKey{}).(bool)
	if !fetcher && !hasKYASignatureLabel(r.Header.Values("Signature-Input")) {
		return nil
	}
	tool, _ := mcp.ToolCallName(m)
	now := time.Now()
	c, ok := p.parts.Front.NewKYAChallenge(p.parts.Site.Origin(r), authserver.AgentPrompt{
		AgentDID: d.AgentDID, Tool: tool, Missing: dec.Missing, Held: d.Scopes,
	}, now)
	if !ok {
		return nil
	}
	s, err := p.parts.Proofs.Signer(r)()
	if err != nil {
		p.parts.Logger.Warn("no edge key to sign the draft-kya-http-02 challenge; answering the MCP prompt", zap.Error(err))
		return nil
	}
	proof, err := s.SignChallengeProof(c.SID, c.ConsentURI, c.Scopes, now.Unix())
	if err != nil {
		p.parts.Logger.Warn("signing the draft-kya-http-02 challenge failed; answering the MCP prompt", zap.Error(err))
		return nil
	}
	var b kyaChallengeBody
	b.Error = "kyaos/authorization-required"
	b.KYAOS.SID, b.KYAOS.ConsentURI, b.KYAOS.PickupURI = c.SID, c.ConsentURI, c.PickupURI
	b.KYAOS.RequiredScopes = c.Scopes
	b.KYAOS.PollIntervalS = int(c.Interval / time.Second)
	b.KYAOS.ChallengeProof = proof
	b.Instructions = kyaInstructions
	body, err := json.Marshal(b)
	if err != nil {
		return nil
	}
	hdr := http.Header{}
	interval := strconv.Itoa(b.KYAOS.PollIntervalS)
	if fetcher {
		hdr.Set("KYA-Auth-Required", "true")
		hdr.Set("KYA-Auth-Url", c.ConsentURI)
		hdr.Set("Link", "<"+c.ConsentURI+`>; rel="kya-authorize"`)
		hdr.Set("KYA-Action", "challenge")
		return &refusal.Refusal{Status: http.StatusOK, Reason: "kya_challenge", Body: body, Header: hdr}
	}
	hdr.Add("WWW-Authenticate", delegationChallenge(p.parts.Site.Host(r), c, interval))
	hdr.Add("WWW-Authenticate", `Bearer resource_metadata="`+refusal.Quote(p.parts.Site.ResourceMetadataURL(r))+`"`)
	hdr.Set("Retry-After", interval)
	return &refusal.Refusal{Status: http.StatusUnauthorized, Reason: "kya_challenge", Body: body, Header: hdr}
}

// delegationChallenge is the Delegation challenge: its parameters in the
// draft's order (realm, sid, consent_uri, pickup_uri, scope, interval,
// kind), each quoted.
func delegationChallenge(realm string, c authserver.KYAChallenge, interval string) string {
	var b strings.Builder
	b.WriteString("Delegation ")
	for i, p := range [][2]string{
		{"realm", realm}, {"sid", c.SID}, {"consent_uri", c.ConsentURI}, {"pickup_uri", c.PickupURI},
		{"scope", strings.Join(c.Scopes, " ")}, {"interval", interval}, {"kind", "delegation"},
	} {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p[0] + `="` + refusal.Quote(p[1]) + `"`)
	}
	return b.String()
}

// maxSignatureInput bounds the Signature-Input the edge reads.
const maxSignatureInput = 8 << 10

// hasKYASignatureLabel reports whether an RFC 9421 Signature-Input (a
// structured-field dictionary, possibly split over several lines) has a
// member labelled kya. Only the labels are read: commas inside quoted
// strings and inner lists do not split members. Anything unreadable
// counts as no label, which only keeps the MCP prompt.
func hasKYASignatureLabel(values []string) bool {
	total := 0
	for _, v := range values {
		if total += len(v); total > maxSignatureInput {
			return false
		}
	}
	for _, v := range values {
		depth, quoted, escaped, start := 0, false, false, 0
		for i := 0; i <= len(v); i++ {
			if i < len(v) {
				c := v[i]
				switch {
				case escaped:
					escaped = false
					continue
				case quoted:
					switch c {
					case '\\':
						escaped = true
					case '"':
						quoted = false
					}
					continue
				case c == '"':
					quoted = true
					continue
				case c == '(':
					depth++
					continue
				case c == ')':
					depth--
					continue
				case c != ',' || depth != 0:
					continue
				}
			}
			member := strings.TrimLeft(v[start:i], " \t")
			if label, _, ok := strings.Cut(member, "="); ok && label == "kya" {
				return true
			}
			start = i + 1
		}
	}
	return false
}
