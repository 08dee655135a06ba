package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// sessionFrom finds an edge session on r (handshake.Sessions.Lookup) and
// applies this route's rules to it.
func (l *level3) sessionFrom(r *http.Request) (*vc.Delegation, error) {
	s := l.sessions
	if s == nil {
		return nil, nil
	}
	d, err := s.Lookup(r)
	if err != nil || d == nil {
		return nil, err
	}
	if err := l.checkSessionRoute(r, d); err != nil {
		return nil, err
	}
	return d, nil
}

// checkSessionRoute applies this route's rules to a session, as Verify
// applies them to a credential: the trust list (to the chain's root
// issuer), the audience (configured, or derived from the Host) and the
// required scopes. The session was checked against the route that issued
// it; this route may be stricter. (A route with another trust list or
// audiences derives another session key and does not get this far; the
// trust and audience checks here are the second line.)
func (l *level3) checkSessionRoute(r *http.Request, d *vc.Delegation) error {
	if !l.cfg.trustsRoot(d.RootIssuer) {
		return fmt.Errorf("%w: session's issuer not trusted on this route", vc.ErrUntrustedIssuer)
	}
	if len(d.Audience) == 0 {
		if l.cfg.RequireAudience {
			return fmt.Errorf("%w: credential names no audience", vc.ErrAudience)
		}
	} else {
		auds := l.cfg.Audiences
		if len(auds) == 0 {
			auds = site.Audiences(l.site.Host(r))
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
	if !d.HasScopes(l.cfg.RequiredScopes...) {
		return fmt.Errorf("%w: session lacks a required scope", vc.ErrMissingScope)
	}
	return nil
}

// trustsRoot reports whether this route's trust list accepts iss as the
// root issuer of a chain (an empty iss only under `trust any`).
func (cfg *Config) trustsRoot(iss string) bool {
	for _, t := range cfg.TrustedIssuers {
		if t == AnyIssuer || (iss != "" && t == iss) {
			return true
		}
	}
	return false
}

// acceptancePolicy fingerprints what decides, on this handler, whether a
// credential is accepted and that a session does not re-check in full:
// the level, the trust list, the configured audiences (none: derived from
// each request's Host) and require_audience, require_presentation, the
// chain depth and the Linked Data proof settings. Lists are sorted and
// deduplicated, so that the order of a config does not matter. It names
// the handler's session key (handshake.DeriveKey) and scopes its proxy-mode
// session bindings (bindingKey). required_scopes is left out: it is
// checked on every use (checkSessionRoute), and routes that differ only
// in it keep sharing sessions. Call it after Provision set the defaults.
func (cfg *Config) acceptancePolicy() string {
	set := func(in []string) []string {
		if len(in) == 0 {
			return nil // absent and empty are one
		}
		out := slices.Clone(in)
		slices.Sort(out)
		return slices.Compact(out)
	}
	var chainFetchAllow []string
	if cfg.ChainFetch != nil {
		// Fetching on with no prefix is refused by Validate; "on" is
		// marked so that it never equals off.
		chainFetchAllow = append([]string{"on"}, set(cfg.ChainFetch.Allow)...)
	}
	var contexts []string
	for u := range cfg.JSONLDContexts {
		contexts = append(contexts, u)
	}
	p := struct {
		Level               int      `json:"level"`
		Trust               []string `json:"trust"`
		Audiences           []string `json:"aud"`
		RequireAudience     bool     `json:"require_aud"`
		RequirePresentation bool     `json:"require_vp"`
		ChainDepth          int      `json:"chain_depth"`
		JSONLD              bool     `json:"jsonld"`
		JSONLDContexts      []string `json:"jsonld_contexts"`
		// What else decides whether a credential is accepted: a route
		// more lenient in any of these must not open sessions that a
		// stricter one takes.
		ClockSkew          int64    `json:"clock_skew"`
		StatusStaleIfError int64    `json:"status_stale"`
		AllowPrivateDIDWeb bool     `json:"private_did_web"`
		ChainFetch         []string `json:"chain_fetch"`
	}{
		Level:               cfg.Level,
		Trust:               set(cfg.TrustedIssuers),
		Audiences:           set(cfg.Audiences),
		RequireAudience:     cfg.RequireAudience,
		RequirePresentation: cfg.RequirePresentation,
		ChainDepth:          vc.MaxChainDepth,
		JSONLD:              !cfg.DisableJSONLD,
		JSONLDContexts:      set(contexts),
		ClockSkew:           int64(cfg.ClockSkew),
		StatusStaleIfError:  int64(cfg.StatusStaleIfError),
		AllowPrivateDIDWeb:  cfg.AllowPrivateDIDWeb,
		ChainFetch:          chainFetchAllow,
	}
	b, _ := json.Marshal(p) // strings, ints and bools only
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
