package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// unmarshalLevel2 parses a Level 2 subdirective of the mcpi block;
// handled is false for a name it does not know. Syntax (each at most once):
//
//	edge_did <did>                      # default did:web:<request host>
//	signing_key <file>                  # private JWK or PEM; default: generated, kept in storage
//	signing_alg EdDSA|ES256             # of a generated key; default EdDSA
//	assertion_ttl <duration>            # whole seconds, at most 5m; default 60s
//	assertion_form jws|hash             # default jws
//	assertion_reuse on|off              # reuse a signed assertion while fresh; default on
//	header_profile mcpi|kya-os|both     # default mcpi
//	upstream <origin>                   # e.g. http://127.0.0.1:9000: the aud, and what auto probes
//	upstream_mcpi on|off|auto           # default on
//	mcpi_probe_ttl <duration>           # default 5m
//	key_storage_key <name>              # default mcpi/edge-keys.json
//	key_reload_interval <duration>      # default 30s
//	key_retention <duration>            # default assertion_ttl + key_reload_interval + 60s
//	key_publish_delay <duration>        # new key published before it signs (rotate-key); default 20s
//	reputation {
//		score <did> <0..100 | 0.0..1.0>  # repeatable, once per DID
//		endpoint <url with {did}>        # GET, answers {"score": <number>}
//		cache_ttl <duration>             # default 5m
//		timeout <duration>               # default 1s
//	}
func (h *Handler) unmarshalLevel2(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	c := &h.Level2Config
	switch name {
	case "edge_did":
		err = args(d, &c.EdgeDID)
	case "signing_key":
		err = args(d, &c.SigningKey)
	case "signing_alg":
		err = oneOf(d, name, &c.SigningAlg, edge.AlgEdDSA, edge.AlgES256)
	case "assertion_ttl":
		err = parseDuration(d, &c.AssertionTTL)
	case "assertion_form":
		err = oneOf(d, name, &c.AssertionForm, edge.FormJWS, edge.FormHash)
	case "assertion_reuse":
		var v string
		if err = oneOf(d, name, &v, "on", "off"); err == nil {
			on := v == "on"
			c.AssertionReuse = &on
		}
	case "header_profile":
		err = oneOf(d, name, &c.HeaderProfile, edge.ProfileMCPI, edge.ProfileKYAOS, edge.ProfileBoth)
	case "upstream":
		if err = args(d, &c.Upstream); err == nil {
			if _, perr := edge.ParseUpstreamOrigin(c.Upstream); perr != nil {
				err = d.Err(perr.Error())
			}
		}
	case "upstream_mcpi":
		err = oneOf(d, name, &c.UpstreamMCPI, edge.UpstreamMCPIOn, edge.UpstreamMCPIOff, edge.UpstreamMCPIAuto)
	case "mcpi_probe_ttl":
		err = parseDuration(d, &c.MCPIProbeTTL)
	case "key_storage_key":
		err = args(d, &c.KeyStorageKey)
	case "key_reload_interval":
		err = parseDuration(d, &c.KeyReloadInterval)
	case "key_retention":
		err = parseDuration(d, &c.KeyRetention)
	case "key_publish_delay":
		err = parseDuration(d, &c.KeyPublishDelay)
	case "reputation":
		err = h.unmarshalReputation(d)
	default:
		return false, nil
	}
	return true, err
}

// unmarshalReputation parses the reputation block.
func (h *Handler) unmarshalReputation(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	rc := new(ReputationConfig)
	err := eachSetting(d, "reputation: ", []string{"score"}, func(sub string) error {
		switch sub {
		case "score":
			var did, val string
			if !d.AllArgs(&did, &val) {
				return d.ArgErr()
			}
			if _, dup := rc.Scores[did]; dup {
				return d.Errf("reputation: score for %s already specified", did)
			}
			v, err := edge.ParseReputationScore(val)
			if err != nil {
				return d.Errf("reputation: %v", err)
			}
			if rc.Scores == nil {
				rc.Scores = make(map[string]float64)
			}
			rc.Scores[did] = v
			return nil
		case "endpoint":
			return args(d, &rc.Endpoint)
		case "cache_ttl":
			return parseDuration(d, &rc.CacheTTL)
		case "timeout":
			return parseDuration(d, &rc.Timeout)
		}
		return d.Errf("unrecognized reputation subdirective %q", sub)
	})
	if err != nil {
		return err
	}
	if len(rc.Scores) == 0 && rc.Endpoint == "" {
		return d.Err("reputation needs at least one score or an endpoint")
	}
	h.Reputation = rc
	return nil
}
