package authzen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
)

// Client evaluates requests at one PDP. It is safe for concurrent use.
type Client struct {
	url     string
	hc      *http.Client
	timeout time.Duration
	cache   *cache
	message string
	now     func() time.Time
	// auth is the credential header sent on every request, if any.
	auth *Header
	// noBatch: the PDP answered that it has no Access Evaluations
	// endpoint (batch.go); it is not asked there again.
	noBatch atomic.Bool
}

// New returns the client of c. base may be nil; it is copied, never
// modified, and its connections go through the SSRF guard unless
// c.AllowPrivate.
func New(c *Config, base *http.Client) (*Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	u, _ := c.endpoint()
	timeout := time.Duration(c.Timeout)
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	hc, err := didresolver.GuardedClient(base, c.AllowPrivate, timeout)
	if err != nil {
		return nil, fmt.Errorf("mcpi: authzen: %w", err)
	}
	cl := &Client{url: u, hc: hc, timeout: timeout, cache: newCache(time.Duration(c.CacheTTL), c.CacheSize),
		message: c.Message, now: time.Now}
	switch {
	case c.Bearer != "":
		cl.auth = &Header{Name: "Authorization", Value: "Bearer " + c.Bearer}
	case c.Header != nil:
		cl.auth = &Header{Name: c.Header.Name, Value: c.Header.Value}
	}
	return cl, nil
}

// Message is the operator's message for a refusal without a reason.
func (c *Client) Message() string { return c.message }

// ErrPDP is wrapped by the errors of an evaluation that gave no decision:
// the PDP could not be reached, did not answer in time, or answered with
// an error status.
var ErrPDP = errors.New("authzen: no decision from the PDP")

// Evaluate asks the PDP about req, or answers from the cache; cached
// reports which. An error means no decision: refuse.
func (c *Client) Evaluate(ctx context.Context, req *Request) (d Decision, cached bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Decision{}, false, fmt.Errorf("%w: the request cannot be written: %v", ErrPDP, err)
	}
	key := sha256.Sum256(body)
	if d, ok := c.cache.get(key, c.now()); ok {
		return d, true, nil
	}
	d, keep, err := c.post(ctx, body)
	if err != nil {
		return Decision{}, false, err
	}
	if keep {
		c.cache.put(key, d, c.now())
	}
	return d, false, nil
}

// post sends one evaluation; keep is false when the PDP asked that its
// answer not be stored (Cache-Control no-store or no-cache).
func (c *Client) post(ctx context.Context, body []byte) (_ Decision, keep bool, _ error) {
	b, keep, _, err := c.exchange(ctx, c.url, body, MaxAnswerSize)
	if err != nil {
		return Decision{}, false, err
	}
	d, err := ParseAnswer(b)
	if err != nil {
		return Decision{}, false, err
	}
	return d, keep, nil
}

// exchange POSTs body to url within the timeout and returns the answer's
// body, read whole and at most max bytes; status is the answer's when it
// is not 200 (the error then says so).
func (c *Client) exchange(ctx context.Context, url string, body []byte, max int64) (_ []byte, keep bool, status int, _ error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, false, 0, fmt.Errorf("%w: %v", ErrPDP, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if c.auth != nil {
		hr.Header.Set(c.auth.Name, c.auth.Value)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		switch {
		case errors.Is(err, didresolver.ErrForbiddenAddress):
			return nil, false, 0, fmt.Errorf("%w: the PDP's address is loopback, private or reserved; set allow_private if it is yours", ErrPDP)
		case ctx.Err() != nil:
			return nil, false, 0, fmt.Errorf("%w: no answer within %s (authzen timeout)", ErrPDP, c.timeout)
		}
		return nil, false, 0, fmt.Errorf("%w: %v", ErrPDP, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false, resp.StatusCode, fmt.Errorf("%w: HTTP status %d (a decision comes with 200)", ErrPDP, resp.StatusCode)
	}
	if mt := carrier.MediaType(resp.Header.Get("Content-Type")); !carrier.IsJSONMediaType(mt) {
		return nil, false, 0, fmt.Errorf("%w: Content-Type %q is not JSON", ErrAnswer, mt)
	}
	if resp.ContentLength > max {
		return nil, false, 0, fmt.Errorf("%w: larger than %d bytes", ErrAnswer, max)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, false, 0, fmt.Errorf("%w: the answer was not read within %s (authzen timeout)", ErrPDP, c.timeout)
	case err != nil:
		return nil, false, 0, fmt.Errorf("%w: reading the answer: %v", ErrPDP, err)
	case int64(len(b)) > max:
		return nil, false, 0, fmt.Errorf("%w: larger than %d bytes", ErrAnswer, max)
	}
	cc := strings.ToLower(strings.Join(resp.Header.Values("Cache-Control"), ","))
	return b, !strings.Contains(cc, "no-store") && !strings.Contains(cc, "no-cache"), 0, nil
}
