// Package authzen asks an external policy decision point (PDP) whether a
// tools/call may go on, over the OpenID AuthZEN Authorization API 1.0
// Access Evaluation endpoint: one POST of a JSON subject, action,
// resource and context, answered by a JSON object whose "decision" is a
// boolean. The edge is the policy enforcement point: anything but a
// well-formed answer with decision true in time refuses the call.
// docs/config/rules.md describes the request the edge sends and what it
// reads of the answer.
package authzen

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// Defaults and bounds.
const (
	DefaultTimeout   = time.Second
	MaxTimeout       = 30 * time.Second
	DefaultCacheSize = 1024
	// MaxAnswerSize bounds the PDP's answer: a decision and a small
	// context; anything larger is refused as malformed.
	MaxAnswerSize = 64 << 10
	// EvaluationPath is the Access Evaluation endpoint's path, appended
	// to a URL given without a path.
	EvaluationPath = "/access/v1/evaluation"
)

// Config is the PDP of a route.
type Config struct {
	// URL of the PDP's Access Evaluation endpoint; a URL without a path
	// gets /access/v1/evaluation. https, or http with AllowPrivate.
	URL string `json:"url"`
	// Timeout of one evaluation, answer read included. Default 1s; at
	// most 30s. A PDP that does not answer in time refuses the call.
	Timeout duration.Duration `json:"timeout,omitempty"`
	// AllowPrivate lets the edge reach the PDP at a loopback or private
	// address (a sidecar, a PDP in the operator's network), and over
	// plain http. Without it the PDP's address is checked as the edge
	// checks the addresses it fetches for credentials: public only, and
	// https.
	AllowPrivate bool `json:"allow_private,omitempty"`
	// CacheTTL keeps each decision that long, keyed by the whole request
	// the edge sent (so the same caller, tool, delegation and arguments
	// reuse it). 0, the default, asks the PDP on every call.
	CacheTTL duration.Duration `json:"cache_ttl,omitempty"`
	// CacheSize bounds the decisions kept. Default 1024.
	CacheSize int `json:"cache_size,omitempty"`
	// Message is what a caller the PDP refused is told when the PDP gives
	// no reason of its own.
	Message string `json:"message,omitempty"`
}

// endpoint checks c and returns the URL to POST to.
func (c *Config) endpoint() (string, error) {
	if c == nil || c.URL == "" {
		return "", errors.New("mcpi: authzen needs the URL of the PDP's evaluation endpoint, such as https://pdp.example.com/access/v1/evaluation")
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", fmt.Errorf("mcpi: authzen url %q must be an absolute URL without userinfo or fragment", c.URL)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && c.AllowPrivate:
	case u.Scheme == "http":
		return "", fmt.Errorf("mcpi: authzen url %q: plain http is accepted only with allow_private (a PDP in your own network); use https", c.URL)
	default:
		return "", fmt.Errorf("mcpi: authzen url %q must be https", c.URL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = EvaluationPath
	}
	return u.String(), nil
}

// Validate checks c without building a client.
func (c *Config) Validate() error {
	if _, err := c.endpoint(); err != nil {
		return err
	}
	switch {
	case c.Timeout < 0 || time.Duration(c.Timeout) > MaxTimeout:
		return fmt.Errorf("mcpi: authzen timeout must be between 0 (default %s) and %s", DefaultTimeout, MaxTimeout)
	case c.CacheTTL < 0:
		return errors.New("mcpi: authzen cache_ttl must not be negative (0 turns the cache off)")
	case c.CacheSize < 0:
		return errors.New("mcpi: authzen cache_size must not be negative")
	case strings.ContainsFunc(c.Message, func(r rune) bool { return r < ' ' }):
		return errors.New("mcpi: authzen message must be one line of text")
	}
	return nil
}
