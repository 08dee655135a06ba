package authserver

import "time"

// The draft-kya-http-02 challenge's session, as the edge's challenge
// names it: made without writing anything (the session id carries its end
// and its agent under a MAC, kyasid.go; the consent URI is a MACed link,
// kya.go).

// KYAChallenge is a draft-kya-http-02 session the edge's challenge names.
type KYAChallenge struct {
	SID, ConsentURI, PickupURI string
	// Scopes are the scopes the call lacked (required_scopes).
	Scopes   []string
	Interval time.Duration
}

// KYAHTTP reports whether the route answers draft-kya-http-02 challenges.
func (s *Server) KYAHTTP() bool { return s.cfg.KYAHTTP != nil }

// NewKYAChallenge makes the session of a draft-kya-http-02 challenge for
// the prompt p, writing nothing; ok is false when the route does not
// offer it or consent here cannot grant what is missing.
func (s *Server) NewKYAChallenge(origin string, p AgentPrompt, now time.Time) (KYAChallenge, bool) {
	grant, ok := s.grantScopes(p)
	if s.cfg.KYAHTTP == nil || !ok || p.AgentDID == "" {
		return KYAChallenge{}, false
	}
	exp := now.Add(s.cfg.KYAHTTP.ttl())
	sid := s.newSID(p.AgentDID, exp)
	return KYAChallenge{
		SID: sid,
		ConsentURI: s.consentLink(origin, ticket{
			Kind: kindPickup, Key: sid, AgentDID: p.AgentDID, Tool: p.Tool,
			Missing: p.Missing, Grant: grant, Expires: exp,
		}),
		PickupURI: origin + pathPickup + sid,
		Scopes:    p.Missing,
		Interval:  s.cfg.KYAHTTP.interval(),
	}, true
}
