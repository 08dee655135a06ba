package didresolver

import (
	"net/http"
	"time"
)

// GuardedClient returns an HTTP client for fetching URLs that come from
// untrusted input (a credential's status list, for one), with the
// protections did:web fetches get: unless allowPrivate, every connection
// is checked by the SSRF guard after name resolution, so a host that
// resolves to a loopback, private or reserved address is refused with an
// error wrapping ErrForbiddenAddress; proxies are not used (the guard would
// check the proxy, not the target); redirects are returned, not followed
// (a redirect could lead anywhere, including to plain http); and the
// client's Timeout is capped at timeout when timeout > 0.
//
// base may be nil. It is copied, never modified. With the guard on, its
// Transport must be nil or an *http.Transport (cloned, proxy dropped, dial
// functions guarded); any other RoundTripper cannot be guarded, and the
// error wraps ErrForbiddenAddress. Callers still choose the scheme (https)
// and cap the response size themselves.
func GuardedClient(base *http.Client, allowPrivate bool, timeout time.Duration) (*http.Client, error) {
	var c http.Client
	if base != nil {
		c = *base
	}
	switch {
	case !allowPrivate:
		t, err := guardTransport(c.Transport)
		if err != nil {
			return nil, err
		}
		c.Transport = t
	case c.Transport == nil:
		c.Transport = newTransport(false)
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if timeout > 0 && (c.Timeout == 0 || c.Timeout > timeout) {
		c.Timeout = timeout
	}
	return &c, nil
}
