// Forwarding handshake calls to the upstream (proxy mode): through the
// route, or with the edge's own client to another origin.

package handshake

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
)

const (
	// MaxResponse bounds the upstream handshake and verify responses the
	// edge reads (proxy mode) to record the challenge and bind the session.
	MaxResponse = 64 << 10
	// Timeout bounds a handshake call or discovery fetch to the upstream.
	Timeout = 10 * time.Second
)

var (
	// ErrUpstreamResponse: the upstream's answer cannot be read or held.
	ErrUpstreamResponse = errors.New("upstream handshake response unusable")
	// ErrResponseTooLarge: the upstream's answer is over MaxResponse.
	ErrResponseTooLarge = errors.New("upstream handshake response too large")
)

// Next is the rest of the route (the host's next handler).
type Next = func(http.ResponseWriter, *http.Request) error

// StatusError is a failure the host answers with Status (a 502 when the
// upstream cannot be reached by the edge's own client).
type StatusError struct {
	Status int
	Err    error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// Forwarder sends handshake calls to the upstream's endpoints.
type Forwarder struct {
	// Client reaches the origins the operator named; Guarded those only a
	// DID document named, through the SSRF guard.
	Client, Guarded *http.Client
	// ForwardedHeaders are the request headers a call to another origin
	// carries (canonical names).
	ForwardedHeaders []string
}

// Forward sends the call to ep: a path through next (the rest of the
// route, normally reverse_proxy) or an absolute URL through the edge's own
// client. With capture, the response is read (up to MaxResponse) and
// returned instead of written to w. scheme is the one the client used
// (X-Forwarded-Proto to another origin).
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, next Next, ep Endpoint, body []byte, capture bool, scheme string) (*Captured, error) {
	if capture {
		// The response is read here: it must not come back compressed.
		r.Header.Del("Accept-Encoding")
	}
	if ep.abs == nil {
		r.URL.Path, r.URL.RawPath, r.URL.RawQuery = ep.path, "", ep.query
		r.RequestURI = r.URL.RequestURI()
		carrier.SetBody(r, body)
		if !capture {
			return nil, next(w, r)
		}
		cw := newCaptureWriter()
		err := next(cw, r)
		if err != nil && !cw.resp.Overflow {
			return nil, err
		}
		if cw.resp.Status == 0 {
			cw.resp.Status = http.StatusOK
		}
		return &cw.resp, nil
	}

	resp, err := f.send(r, ep, body, scheme)
	if err != nil {
		return nil, &StatusError{http.StatusBadGateway, fmt.Errorf("forwarding handshake call: %w", err)}
	}
	defer resp.Body.Close()
	if capture {
		data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
		if err != nil {
			return nil, &StatusError{http.StatusBadGateway, fmt.Errorf("reading handshake response: %w", err)}
		}
		out := &Captured{Status: resp.StatusCode, Header: resp.Header, Body: data}
		RemoveHopByHop(out.Header)
		if len(data) > MaxResponse {
			out.Overflow = true
		}
		return out, nil
	}
	hdr := w.Header()
	RemoveHopByHop(resp.Header)
	for k, v := range resp.Header {
		hdr[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body) // a failure here means the client left
	return nil, nil
}

// send POSTs body to ep's URL, another origin than the route's, with the
// headers a JSON-RPC call needs and the edge's own (the Level 2 identity
// headers, when set, and X-Forwarded-*), never the client's others:
// cookies and tokens meant for this site do not travel elsewhere. A URL
// that only a DID document named goes through the SSRF guard.
func (f *Forwarder) send(r *http.Request, ep Endpoint, body []byte, scheme string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, ep.abs.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, k := range f.ForwardedHeaders {
		if v, ok := r.Header[k]; ok {
			req.Header[k] = v
		}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		// Replaced, not appended: the client's own value is not trusted.
		req.Header.Set("X-Forwarded-For", ip)
	}
	req.Header.Set("X-Forwarded-Proto", scheme)
	req.Header.Set("X-Forwarded-Host", r.Host)
	client := f.Client
	if ep.discovered {
		client = f.Guarded
	}
	return client.Do(req)
}

// NewClient is the client for absolute upstream endpoints and discovery
// documents: bounded in time, no redirects (an endpoint that moves is a
// configuration problem, and following it could leave the upstream's
// origin).
func NewClient() *http.Client {
	return &http.Client{
		Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: Timeout,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
	}
}

// hopByHop are the headers of one connection (RFC 9110 §7.6.1).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// RemoveHopByHop deletes the headers of one connection from hdr.
func RemoveHopByHop(hdr http.Header) {
	for _, v := range hdr.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				hdr.Del(name)
			}
		}
	}
	for _, k := range hopByHop {
		hdr.Del(k)
	}
}

// Captured is an upstream response read into memory.
type Captured struct {
	Status   int
	Header   http.Header
	Body     []byte
	Overflow bool
}

// WriteTo relays the response unchanged.
func (c *Captured) WriteTo(w http.ResponseWriter) {
	hdr := w.Header()
	for k, v := range c.Header {
		hdr[k] = v
	}
	hdr.Set("Content-Length", strconv.Itoa(len(c.Body)))
	w.WriteHeader(c.Status)
	_, _ = w.Write(c.Body)
}

// captureWriter collects a response from next, up to MaxResponse. Used
// only for handshake responses (small JSON); everything else streams.
type captureWriter struct {
	resp Captured
}

func newCaptureWriter() *captureWriter {
	return &captureWriter{resp: Captured{Header: make(http.Header)}}
}

func (c *captureWriter) Header() http.Header { return c.resp.Header }

func (c *captureWriter) WriteHeader(code int) {
	if code < 200 && code != http.StatusSwitchingProtocols {
		return // informational; the final status follows
	}
	if c.resp.Status == 0 {
		c.resp.Status = code
	}
}

func (c *captureWriter) Write(p []byte) (int, error) {
	if c.resp.Status == 0 {
		c.resp.Status = http.StatusOK
	}
	if len(c.resp.Body)+len(p) > MaxResponse {
		c.resp.Overflow = true
		return 0, ErrResponseTooLarge
	}
	c.resp.Body = append(c.resp.Body, p...)
	return len(p), nil
}

// Flush is a no-op: the response is held until complete.
func (c *captureWriter) Flush() {}
