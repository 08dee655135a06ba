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
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

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
	// Bearer, when set, authenticates the edge to the PDP: every request
	// carries "Authorization: Bearer <Bearer>". It is a secret: never
	// logged nor put in an error.
	Bearer string `json:"bearer,omitempty"`
	// Header, when set, authenticates the edge to the PDP with a header of
	// the PDP's choosing (an API key), sent on every request. At most one
	// of Bearer and Header.
	Header *Header `json:"header,omitempty"`
}

// Header is a header the edge sends the PDP; Value is a secret.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// reservedHeaders are the headers of the request itself, which a
// credential header may not replace.
var reservedHeaders = []string{"Accept", "Connection", "Content-Length", "Content-Type", "Host", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// checkCredential checks Bearer and Header; its errors name the setting,
// never its value.
func (c *Config) checkCredential() error {
	switch {
	case c.Bearer != "" && c.Header != nil:
		return errors.New("mcpi: authzen: set bearer or header, not both: the PDP takes one credential")
	case c.Bearer != "" && !httpguts.ValidHeaderFieldValue(c.Bearer), c.Bearer != "" && strings.ContainsAny(c.Bearer, " \t"):
		return errors.New("mcpi: authzen bearer must be a token without spaces or control characters; check the value or the environment variable it comes from")
	case c.Header == nil:
		return nil
	case !httpguts.ValidHeaderFieldName(c.Header.Name):
		return fmt.Errorf("mcpi: authzen header: %q is not a header name", c.Header.Name)
	case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(c.Header.Name)):
		return fmt.Errorf("mcpi: authzen header: %s is a header of the request itself; name the header the PDP reads its credential from", c.Header.Name)
	case c.Header.Value == "" || !httpguts.ValidHeaderFieldValue(c.Header.Value):
		return fmt.Errorf("mcpi: authzen header %s: the value must be non-empty, without control characters; check the value or the environment variable it comes from", c.Header.Name)
	}
	return nil
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
	return c.checkCredential()
}
