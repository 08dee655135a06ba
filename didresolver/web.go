package didresolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// webResolver fetches did:web documents over HTTPS with a timeout, a size
// cap, no redirects and the SSRF guard.
type webResolver struct {
	client  *http.Client
	maxSize int64
	// plainHTTPLocal: use http for local hosts (see WithAllowHTTP).
	plainHTTPLocal bool
	timeout        time.Duration
	// setupErr is returned for every did:web resolution when the options
	// cannot be honoured (an unguardable custom transport): failing closed
	// is safer than fetching unguarded, and New has no error return.
	setupErr error
}

func newWebResolver(o options) *webResolver {
	w := &webResolver{
		maxSize: o.maxDocumentSize,
		timeout: o.timeout,
		// Plain http only for tests against local servers: allowing it
		// for public hosts would let a network attacker substitute
		// documents.
		plainHTTPLocal: o.allowHTTP && o.allowPrivateAddress,
	}
	guard := !o.allowPrivateAddress
	var c http.Client
	switch {
	case o.httpClient == nil:
		c.Transport = newTransport(guard)
	case guard:
		c = *o.httpClient
		t, err := guardTransport(c.Transport)
		if err != nil {
			w.setupErr = err
			return w
		}
		c.Transport = t
	default:
		c = *o.httpClient
	}
	// A redirect could hand the DID to another host. did:web documents are
	// served in place, so redirects are reported instead of followed.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if c.Timeout == 0 || c.Timeout > o.timeout {
		c.Timeout = o.timeout
	}
	w.client = &c
	return w
}

func (w *webResolver) resolve(ctx context.Context, d DID) (*Document, error) {
	if w.setupErr != nil {
		return nil, w.setupErr
	}
	u, err := webURL(d, w.plainHTTPLocal)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: building request", ErrInvalidDID)
	}
	req.Header.Set("Accept", "application/did+json, application/json;q=0.9")
	resp, err := w.client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, ErrForbiddenAddress):
			return nil, fmt.Errorf("%w: did:web host resolves to a loopback, private or reserved address", ErrForbiddenAddress)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w: did:web fetch aborted: %w", ErrFetch, ctx.Err())
		case isTimeout(err):
			// The client's own timeout can fire a moment before the context's.
			return nil, fmt.Errorf("%w: did:web fetch timed out: %w", ErrFetch, context.DeadlineExceeded)
		default:
			return nil, fmt.Errorf("%w: %w", ErrFetch, err)
		}
	}
	defer resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound || code == http.StatusGone:
		return nil, fmt.Errorf("%w: did:web HTTP status %d", ErrNotFound, code)
	case code >= 300 && code < 400:
		return nil, fmt.Errorf("%w: did:web HTTP status %d (redirects are not followed)", ErrFetch, code)
	case code < 200 || code >= 300:
		return nil, fmt.Errorf("%w: did:web HTTP status %d", ErrFetch, code)
	}
	if resp.ContentLength > w.maxSize {
		return nil, fmt.Errorf("%w: did:web document over %d bytes", ErrTooLarge, w.maxSize)
	}
	// One byte past the cap tells "exactly at the cap" from "over it".
	body, err := io.ReadAll(io.LimitReader(resp.Body, w.maxSize+1))
	// A response that raced with cancellation may be cut short without a
	// read error; it says nothing about the document, so it must not be
	// reported (and cached) as an invalid one.
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: reading did:web document: %w", ErrFetch, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading did:web document failed", ErrFetch)
	}
	if int64(len(body)) > w.maxSize {
		return nil, fmt.Errorf("%w: did:web document over %d bytes", ErrTooLarge, w.maxSize)
	}
	doc, err := ParseDocument(body)
	if err != nil {
		return nil, err
	}
	if doc.ID != d.String() {
		return nil, fmt.Errorf("%w: did:web document id differs from the DID", ErrIDMismatch)
	}
	return doc, nil
}

// webURL maps a did:web to its document URL (did:web method spec §3.2):
// the first colon-separated part is the host, "%3A" in it introduces a port,
// and the remaining parts are path segments. The scheme is https, or http
// when plainHTTPLocal is set and the host is "localhost" or a loopback or
// private IP literal.
func webURL(d DID, plainHTTPLocal bool) (string, error) {
	if d.Method != "web" {
		return "", fmt.Errorf("%w: not a did:web", ErrUnsupportedMethod)
	}
	parts := strings.Split(d.ID, ":")
	host, err := webHost(parts[0])
	if err != nil {
		return "", err
	}
	path := "/.well-known/did.json"
	if len(parts) > 1 {
		segs := make([]string, 0, len(parts)-1)
		for _, p := range parts[1:] {
			s, err := url.PathUnescape(p)
			// Segments that would change the path's shape once decoded are
			// refused so one DID maps to one URL.
			if err != nil || s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/?#\\") || hasControl(s) {
				return "", fmt.Errorf("%w: invalid did:web path segment", ErrInvalidDID)
			}
			segs = append(segs, s)
		}
		path = "/" + strings.Join(segs, "/") + "/did.json"
	}
	scheme := "https"
	if plainHTTPLocal && isLocalHost(host) {
		scheme = "http"
	}
	u := url.URL{Scheme: scheme, Host: host, Path: path}
	return u.String(), nil
}

// webHost decodes and checks the host part. IP literals are accepted
// (the SSRF guard decides about addresses), IPv6 literals cannot be written
// in a did:web and user info never can.
func webHost(raw string) (string, error) {
	hostport := raw
	for _, enc := range []string{"%3A", "%3a"} {
		hostport = strings.ReplaceAll(hostport, enc, ":")
	}
	host, port, hasPort := strings.Cut(hostport, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' || strings.Contains(port, ":") {
			return "", fmt.Errorf("%w: invalid did:web port", ErrInvalidDID)
		}
	}
	if !validHostname(host) {
		return "", fmt.Errorf("%w: invalid did:web host", ErrInvalidDID)
	}
	return hostport, nil
}

func isLocalHost(hostport string) bool {
	host, _, _ := strings.Cut(hostport, ":")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && refusedAddr(a)
}

func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
