package edge

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/ldproof"
)

// Complete delegation verification: chains (ancestors from the
// KYA-OS-Delegation-Chain header), revocation (status lists), presentations
// (replay guard and handshake nonces) and JSON-LD Linked Data proofs. The
// rules themselves are vc's; this file wires them to the request and the
// config.

const (
	defaultStatusListTTL = 60 * time.Second
)

// DelegationConfig holds the settings of revocation checking and Linked
// Data proofs. It is embedded in Config, so its fields are top-level JSON
// config fields of http.handlers.mcpi.
type DelegationConfig struct {
	// How long a fetched status list (a credential's credentialStatus,
	// StatusList2021 or Bitstring Status List) is used before it is fetched
	// again. Default: 60s.
	StatusListTTL duration.Duration `json:"status_list_ttl,omitempty"`

	// How long past its TTL a status list that can no longer be fetched
	// (or whose new copy does not verify) is still used. Default: 0: a
	// revocation status that cannot be established fails closed with 503
	// status_unavailable. A longer window keeps the edge up through a
	// status server outage, at the cost of learning of revocations later.
	StatusStaleIfError duration.Duration `json:"status_stale_if_error,omitempty"`

	// Turn off JSON-LD Linked Data proofs (Ed25519Signature2018, the
	// JSON-LD Ed25519Signature2020, JsonWebSignature2020,
	// EcdsaSecp256k1Signature2019, eddsa-rdfc-2022). On by default; their
	// contexts are embedded, never fetched. Off, such credentials get 401
	// unsupported_format.
	DisableJSONLD bool `json:"disable_jsonld,omitempty"`

	// Extra JSON-LD context documents, context URL → file, read at
	// provisioning, for credentials naming contexts that are not embedded.
	// A context decides what a signature covers: supply only documents
	// you trust.
	JSONLDContexts map[string]string `json:"jsonld_contexts,omitempty"`

	// Fetch a chain's missing parent credentials from the https URL their
	// child names, within an allow-list of URL prefixes (chainfetch.go).
	// Off unless set.
	ChainFetch *ChainFetchConfig `json:"chain_fetch,omitempty"`

	// statusClient fetches status lists; nil is vc's default client. Tests
	// set it to trust their TLS server.
	statusClient *http.Client
}

// delegationOptions are the verifier options of this file: status lists,
// the replay guard that makes every presentation single-use at every level
// (through the nonce store, so provisionNonceStore must have run) and
// Linked Data proofs.
func (h *Handler) delegationOptions() ([]vc.Option, error) {
	if h.cfg.StatusListTTL == 0 {
		h.cfg.StatusListTTL = Duration(defaultStatusListTTL)
	}
	opts := []vc.Option{
		// Status lists are fetched like did:web documents: private
		// addresses only when allowed (tests and development).
		vc.WithStatusLists(h.cfg.statusClient, h.cfg.AllowPrivateDIDWeb),
		vc.WithStatusListTTL(time.Duration(h.cfg.StatusListTTL)),
		vc.WithStatusStaleIfError(time.Duration(h.cfg.StatusStaleIfError)),
	}
	if h.nonces != nil {
		opts = append(opts, vc.WithReplayGuard(admit.ReplayGuard(h.nonces)))
	}
	if o := h.chainFetchOption(); o != nil {
		opts = append(opts, o)
	}
	if !h.cfg.DisableJSONLD {
		var ldOpts []ldproof.Option
		for u, file := range h.cfg.JSONLDContexts {
			ldOpts = append(ldOpts, ldproof.WithContextFile(u, file))
		}
		ld, err := ldproof.New(ldOpts...)
		if err != nil {
			return nil, fmt.Errorf("mcpi: JSON-LD: %v", err)
		}
		opts = append(opts, vc.WithLinkedDataVerifier(ld))
	}
	return opts, nil
}

// validateDelegation runs from Validate.
func (cfg *Config) validateDelegation() error {
	c := &cfg.DelegationConfig
	if c.StatusListTTL < 0 || c.StatusStaleIfError < 0 {
		return errors.New("mcpi: durations must not be negative")
	}
	if err := c.ChainFetch.validate(); err != nil {
		return err
	}
	if c.DisableJSONLD && len(c.JSONLDContexts) > 0 {
		return errors.New("mcpi: jsonld_context needs JSON-LD on")
	}
	for u, file := range c.JSONLDContexts {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || (p.Host == "" && p.Opaque == "") {
			return fmt.Errorf("mcpi: JSON-LD context %q is not an absolute URL", u)
		}
		if file == "" {
			return fmt.Errorf("mcpi: JSON-LD context %q: no file", u)
		}
	}
	return nil
}
