package didresolver

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

const (
	defaultTimeout         = 5 * time.Second
	defaultMaxDocumentSize = 64 << 10
)

// Option configures New.
type Option func(*options)

type options struct {
	httpClient          *http.Client
	timeout             time.Duration
	maxDocumentSize     int64
	allowPrivateAddress bool
	allowHTTP           bool
}

// WithHTTPClient sets the client used for did:web (its Transport's dialer is
// wrapped with the SSRF guard unless private addresses are allowed).
//
// The client is copied, never modified. With the guard on, its Transport
// must be nil or an *http.Transport (it is cloned, its proxy setting
// dropped, and its dial functions guarded); any other RoundTripper makes
// every did:web resolution fail with ErrForbiddenAddress. Redirects are
// never followed, and the client timeout is capped by WithTimeout.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithTimeout bounds one did:web fetch. Default 5s. Non-positive values keep
// the default.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithMaxDocumentSize caps a fetched document. Default 64 KiB. Non-positive
// values keep the default.
func WithMaxDocumentSize(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxDocumentSize = n
		}
	}
}

// WithAllowPrivateAddresses lets did:web reach loopback and private
// addresses. For tests and private deployments only.
func WithAllowPrivateAddresses(allow bool) Option {
	return func(o *options) { o.allowPrivateAddress = allow }
}

// WithAllowHTTP lets did:web use plain http (only together with private
// addresses; for tests).
//
// Plain http is used only for hosts written as "localhost" or as a
// loopback or private IP literal (did:web:127.0.0.1%3A8080); every other
// did:web is still fetched over https, so enabling it for local testing
// does not downgrade real issuers.
func WithAllowHTTP(allow bool) Option { return func(o *options) { o.allowHTTP = allow } }

// router dispatches on the DID method. did:key and did:jwk are computed
// locally; only did:web does I/O.
type router struct {
	web  *webResolver
	keys derivedKeys
}

// New returns a resolver for did:key, did:jwk and did:web.
//
// A DID URL's fragment is ignored: the document of the DID is returned.
// New does not cache; wrap the result in NewCache.
func New(opts ...Option) Resolver {
	o := options{timeout: defaultTimeout, maxDocumentSize: defaultMaxDocumentSize}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return &router{web: newWebResolver(o)}
}

// Resolve implements Resolver.
func (r *router) Resolve(ctx context.Context, did string) (*Document, error) {
	d, err := ParseDID(did)
	if err != nil {
		return nil, err
	}
	d.Fragment = ""
	switch d.Method {
	case "key":
		e, err := r.keys.get(d)
		if err != nil {
			return nil, err
		}
		return e.doc, nil
	case "jwk":
		return resolveJWKDID(d)
	case "web":
		return r.web.resolve(ctx, d)
	default:
		return nil, fmt.Errorf("%w: only did:key, did:jwk and did:web are resolved", ErrUnsupportedMethod)
	}
}

// didKey implements didKeyResolver.
func (r *router) didKey(d DID) (*derivedKey, bool, error) {
	e, err := r.keys.get(d)
	return e, true, err
}

var (
	_ Resolver       = (*router)(nil)
	_ didKeyResolver = (*router)(nil)
)
