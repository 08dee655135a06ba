package authserver

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Consent for KYA-OS agents. An agent that presents a delegation lacking
// a scope is refused with a prompt (the needs_authorization result, the
// 2026 input-required consent, or the draft-kya-http-02 challenge) naming
// this server's agent consent page. Approving there has the signed-in user
// issue a delegation to that agent DID for the scopes it held and the
// missing ones; the agent gets it by retrying the prompted call (with the
// prompt's resume token or sealed requestState) or by polling the pickup
// endpoint (draft-kya-http-02).
//
// Making a prompt writes nothing: the consent link carries its parameters
// and a MAC under the server's secret, so the page shows only what the
// edge put there. Records are written by the signed-in user's approval
// (counted against that user) and by the pinning pickup poll (counted
// against the agent the session was issued to).

// KYAHTTPConfig switches on the draft-kya-http-02 challenge and pickup.
type KYAHTTPConfig struct {
	// TTL is how long a challenge's session lasts: consent, then pickup.
	// Default and maximum: 10m.
	TTL time.Duration `json:"ttl,omitempty"`
	// Interval is the poll interval the challenge asks for. Default: 3s.
	Interval time.Duration `json:"interval,omitempty"`
}

// Defaults and limits of agent consent.
const (
	DefaultKYAHTTPTTL      = 10 * time.Minute
	DefaultKYAHTTPInterval = 3 * time.Second
	// agentConsentTTL is how long a prompt's consent link can be used, and
	// its approval picked up by the retry.
	agentConsentTTL = 10 * time.Minute
	// maxApprovalsPerUser bounds the live approvals of one user.
	maxApprovalsPerUser = 32
	// maxPinsPerAgent bounds the live pickup pins of one agent.
	maxPinsPerAgent = 16
	// maxTicketScopes bounds the scopes a consent link names.
	maxTicketScopes = 50
)

// Validate checks c; zero values mean the defaults.
func (c *KYAHTTPConfig) Validate() error {
	if c == nil {
		return nil
	}
	if c.TTL < 0 || c.TTL > DefaultKYAHTTPTTL {
		return errors.New("mcpi: authorization_server kya_http ttl must be between 1s and 10m")
	}
	if c.Interval < 0 || c.Interval > 5*time.Minute {
		return errors.New("mcpi: authorization_server kya_http_interval must be between 1s and 5m")
	}
	return nil
}

func (c *KYAHTTPConfig) ttl() time.Duration {
	if c.TTL == 0 {
		return DefaultKYAHTTPTTL
	}
	return max(c.TTL, time.Second)
}

func (c *KYAHTTPConfig) interval() time.Duration {
	if c.Interval == 0 {
		return DefaultKYAHTTPInterval
	}
	return max(c.Interval.Truncate(time.Second), time.Second)
}

// Kinds of agent consent.
const (
	kindResume = "resume" // a prompt answered by retrying the call
	kindPickup = "pickup" // a draft-kya-http-02 session
)

// ticket is what an agent consent link asks the user to approve.
type ticket struct {
	Kind     string
	Key      string // the resume token, or the pickup session id
	AgentDID string
	Tool     string
	Missing  []string // the scopes consent adds
	Grant    []string // every scope the delegation will hold
	Expires  time.Time
}

// ticketMACParam holds the consent link's MAC; its presence in the query
// of the authorization endpoint (with kya_consent for the form's post)
// makes the request one for the agent consent page.
const ticketMACParam = "kya_ticket"

// ticketParams are the consent link's parameters, in the order the MAC
// covers them.
var ticketParams = []string{"kind", "key", "agent_did", "tool", "missing", "grant", "exp"}

func (t ticket) values() []string {
	return []string{t.Kind, t.Key, t.AgentDID, t.Tool, strings.Join(t.Missing, " "), strings.Join(t.Grant, " "),
		strconv.FormatInt(t.Expires.Unix(), 10)}
}

func (s *Server) ticketMAC(t ticket) []byte {
	return mac(s.secrets.csrf, append([]string{"agent consent"}, t.values()...)...)
}

// consentLink is the absolute URL of the agent consent page for t.
func (s *Server) consentLink(origin string, t ticket) string {
	v := url.Values{}
	for i, val := range t.values() {
		v.Set(ticketParams[i], val)
	}
	v.Set(ticketMACParam, encodeMAC(s.ticketMAC(t)))
	return origin + pathAuthorize + "?" + v.Encode()
}

var (
	errTicketMalformed = errors.New("this consent link is incomplete or was altered: ask the agent to call the tool again for a new one")
	errTicketExpired   = errors.New("this consent link has expired: ask the agent to call the tool again for a new one")
)

// readTicket reads and checks the ticket of a consent link or form.
func (s *Server) readTicket(v url.Values, now time.Time) (ticket, error) {
	for _, p := range append(slices.Clone(ticketParams), ticketMACParam) {
		if len(v[p]) != 1 || len(v[p][0]) > maxParamLen {
			return ticket{}, errTicketMalformed
		}
	}
	exp, err := strconv.ParseInt(v.Get("exp"), 10, 64)
	if err != nil {
		return ticket{}, errTicketMalformed
	}
	t := ticket{
		Kind: v.Get("kind"), Key: v.Get("key"), AgentDID: v.Get("agent_did"), Tool: v.Get("tool"),
		Missing: strings.Fields(v.Get("missing")), Grant: strings.Fields(v.Get("grant")), Expires: time.Unix(exp, 0),
	}
	if !macEqual(v.Get(ticketMACParam), s.ticketMAC(t)) || (t.Kind != kindResume && t.Kind != kindPickup) ||
		t.Key == "" || t.AgentDID == "" || len(t.Grant) == 0 || len(t.Grant) > maxTicketScopes {
		return ticket{}, errTicketMalformed
	}
	if !now.Before(t.Expires) {
		return ticket{}, errTicketExpired
	}
	return t, nil
}

// AgentPrompt is a refused call the edge asks the user to approve.
type AgentPrompt struct {
	AgentDID string
	Tool     string
	// Missing are the scopes the call lacked; Held those the agent's
	// delegation has. The delegation consent issues holds both (those of
	// the route's scopes).
	Missing, Held []string
}

// grantScopes are the route's scopes among p's held and missing ones, or
// ok=false when a missing scope is not the route's (no consent can add it).
func (s *Server) grantScopes(p AgentPrompt) ([]string, bool) {
	var out []string
	for _, sc := range p.Missing {
		if _, ok := s.scopes[sc]; !ok {
			return nil, false
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	for _, sc := range p.Held {
		if _, ok := s.scopes[sc]; ok && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, len(out) > 0 && len(out) <= maxTicketScopes
}

// ConsentURL is the consent link of a prompt answered by retrying the
// call with resumeToken (the 2025 needs_authorization result, the 2026
// input-required consent); ok is false when consent here cannot grant
// what is missing. The link is the one page; the prompt may add its own
// parameters (tool, scopes, agent_did, resume_token), which it ignores.
func (s *Server) ConsentURL(origin string, p AgentPrompt, resumeToken string, now time.Time) (string, bool) {
	grant, ok := s.grantScopes(p)
	if !ok || p.AgentDID == "" || resumeToken == "" {
		return "", false
	}
	return s.consentLink(origin, ticket{
		Kind: kindResume, Key: resumeToken, AgentDID: p.AgentDID, Tool: p.Tool,
		Missing: p.Missing, Grant: grant, Expires: now.Add(agentConsentTTL),
	}), true
}
