package level3

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// checkSessionRoute applies this route's rules to a session, as Verify
// applies them to a credential: the trust list (to the chain's root
// issuer), the audience (configured, or derived from the Host) and the
// required scopes. The session was checked against the route that issued
// it; this route may be stricter. (A route with another trust list or
// audiences derives another session key and does not get this far; the
// trust and audience checks here are the second line.)
func (s *Step) checkSessionRoute(r *http.Request, d *vc.Delegation) error {
	if !s.trustsRoot(d.RootIssuer) {
		return fmt.Errorf("%w: session's issuer not trusted on this route", vc.ErrUntrustedIssuer)
	}
	if len(d.Audience) == 0 {
		if s.cfg.RequireAudience {
			return fmt.Errorf("%w: credential names no audience", vc.ErrAudience)
		}
	} else {
		auds := s.cfg.Audiences
		if len(auds) == 0 {
			auds = site.Audiences(s.site.Host(r))
		}
		ok := false
		for _, a := range d.Audience {
			if slices.Contains(auds, a) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%w: session is for another audience", vc.ErrAudience)
		}
	}
	if !d.HasScopes(s.cfg.RequiredScopes...) {
		return fmt.Errorf("%w: session lacks a required scope", vc.ErrMissingScope)
	}
	return nil
}

// trustsRoot reports whether this route's trust list accepts iss as the
// root issuer of a chain (an empty iss only under `trust any`).
func (s *Step) trustsRoot(iss string) bool {
	for _, t := range s.cfg.TrustedIssuers {
		if t == vc.AnyIssuer || (iss != "" && t == iss) {
			return true
		}
	}
	return false
}

// Sessions are the edge sessions the step issues and accepts (terminate
// mode; nil in proxy mode).
func (s *Step) Sessions() *handshake.Sessions { return s.sessions }

// UseSessions makes the step issue and accept sessions with ss instead:
// those of another route or replica (one key), or read with another clock.
// Call it before the step serves requests.
func (s *Step) UseSessions(ss *handshake.Sessions) { s.sessions = ss }
