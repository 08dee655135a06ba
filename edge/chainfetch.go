package edge

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Fetched ancestors: a delegation chain's parent fetched from the https URL
// its child names (credentialSubject.delegation.parentCredentialUrl
// [ours], or an https delegation.parentId), off unless configured. The
// rules are vc's (vc/chainfetch.go); this file holds the config.

const (
	defaultChainFetchTimeout  = 5 * time.Second
	defaultChainFetchMaxSize  = 64 << 10
	defaultChainFetchCacheTTL = 5 * time.Minute
)

// ChainFetchConfig turns on fetching a delegation chain's missing parents
// from the https URL their child names. A parent is fetched only when it
// was not presented (in a Verifiable Presentation or the
// KYA-OS-Delegation-Chain header) and its child's issuer is not trusted
// directly; what is fetched is verified like every other ancestor.
type ChainFetchConfig struct {
	// URL prefixes parents may be fetched from, each
	// https://host[:port]/path/ (path ending with "/", no query): a URL is
	// fetched only when it has the same host and port and its path lies
	// under the prefix's. Required: the URLs come from credentials anyone
	// can mint, and the edge must not be made to fetch from anywhere else.
	Allow []string `json:"allow,omitempty"`

	// Timeout of one fetch. Default: 5s.
	Timeout duration.Duration `json:"timeout,omitempty"`

	// Largest parent credential fetched, in bytes. Default: 65536.
	MaxSize int64 `json:"max_size,omitempty"`

	// How long a fetched parent is reused before it is fetched again; it
	// is verified on every use all the same. Failures are remembered for
	// 5s (or this TTL if shorter). Default: 5m.
	CacheTTL duration.Duration `json:"cache_ttl,omitempty"`

	// client fetches; nil is vc's default client. Tests set it to trust
	// their TLS server.
	client *http.Client
}

// chainFetchOption is the vc option of the config, nil when fetching is
// off. It sets the defaults, so it runs from Provision. Parents are
// fetched like status lists and did:web documents: private addresses
// only with allow_private_did_web.
func (h *Handler) chainFetchOption() vc.Option {
	c := h.cfg.ChainFetch
	if c == nil {
		return nil
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(defaultChainFetchTimeout)
	}
	if c.MaxSize == 0 {
		c.MaxSize = defaultChainFetchMaxSize
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = Duration(defaultChainFetchCacheTTL)
	}
	if len(h.cfg.TrustedIssuers) == 1 && h.cfg.TrustedIssuers[0] == AnyIssuer && h.logger != nil {
		h.logger.Warn("chain_fetch has no effect with trust any: every issuer is trusted directly, so no parent is ever needed")
	}
	return vc.WithChainFetch(vc.ChainFetch{
		Allow:        c.Allow,
		Client:       c.client,
		AllowPrivate: h.cfg.AllowPrivateDIDWeb,
		Timeout:      time.Duration(c.Timeout),
		MaxSize:      int(c.MaxSize),
		CacheTTL:     time.Duration(c.CacheTTL),
	})
}

// validate checks the config; nil (off) is valid.
func (c *ChainFetchConfig) validate() error {
	if c == nil {
		return nil
	}
	if len(c.Allow) == 0 {
		return errors.New("mcpi: chain_fetch needs at least one allowed URL prefix")
	}
	for _, p := range c.Allow {
		if err := vc.CheckFetchPrefix(p); err != nil {
			return fmt.Errorf("mcpi: chain_fetch: allowed prefix %q: %v", p, err)
		}
	}
	if c.Timeout < 0 || c.CacheTTL < 0 {
		return errors.New("mcpi: chain_fetch: durations must not be negative")
	}
	if c.MaxSize < 0 || c.MaxSize > 1<<30 {
		return errors.New("mcpi: chain_fetch: max_size must be between 1 byte and 1GiB")
	}
	return nil
}
