// Forwarding handshake calls to the upstream (proxy mode): through the
// route, or with the edge's own client to another origin.

package edge

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
)

// forwardCall sends the call to ep: a path through next (the rest of the
// route, normally reverse_proxy) or an absolute URL through the edge's own
// client. With capture, the response is read (up to maxHandshakeResponse)
// and returned instead of written to w.
func (h *Handler) forwardCall(w http.ResponseWriter, r *http.Request, next Next, ep endpointRef, body []byte, capture bool) (*capturedResponse, error) {
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
		cw := &captureWriter{resp: capturedResponse{header: make(http.Header)}}
		err := next(cw, r)
		if err != nil && !cw.resp.overflow {
			return nil, err
		}
		if cw.resp.status == 0 {
			cw.resp.status = http.StatusOK
		}
		return &cw.resp, nil
	}

	resp, err := h.sendUpstream(r, ep, body)
	if err != nil {
		return nil, httpError(http.StatusBadGateway, fmt.Errorf("forwarding handshake call: %w", err))
	}
	defer resp.Body.Close()
	if capture {
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxHandshakeResponse+1))
		if err != nil {
			return nil, httpError(http.StatusBadGateway, fmt.Errorf("reading handshake response: %w", err))
		}
		out := &capturedResponse{status: resp.StatusCode, header: resp.Header, body: data}
		removeHopByHop(out.header)
		if len(data) > maxHandshakeResponse {
			out.overflow = true
		}
		return out, nil
	}
	hdr := w.Header()
	removeHopByHop(resp.Header)
	for k, v := range resp.Header {
		hdr[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body) // a failure here means the client left
	return nil, nil
}

// sendUpstream POSTs body to ep's URL, another origin than the route's,
// with the headers a JSON-RPC call needs and the edge's own (the Level 2
// identity headers, when set, and X-Forwarded-*), never the client's
// others: cookies and tokens meant for this site do not travel elsewhere.
// A URL that only a DID document named goes through the SSRF guard.
func (h *Handler) sendUpstream(r *http.Request, ep endpointRef, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, ep.abs.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, k := range forwardedToOrigins {
		if v, ok := r.Header[k]; ok {
			req.Header[k] = v
		}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		// Replaced, not appended: the client's own value is not trusted.
		req.Header.Set("X-Forwarded-For", ip)
	}
	req.Header.Set("X-Forwarded-Proto", h.requestScheme(r))
	req.Header.Set("X-Forwarded-Host", r.Host)
	client := h.l3.client
	if ep.discovered {
		client = h.l3.guarded
	}
	return client.Do(req)
}

// forwardedToOrigins are the request headers a handshake call to another
// origin carries (canonical names): what a JSON-RPC call needs, and the
// identity headers only the edge sets (the client's were stripped).
var forwardedToOrigins = append([]string{
	"Content-Type", "Accept", "User-Agent", "Mcp-Protocol-Version", "Mcp-Session-Id",
}, identity.Headers...)

// newHandshakeClient is the client for absolute upstream endpoints and
// discovery documents: bounded in time, no redirects (an endpoint that
// moves is a configuration problem, and following it could leave the
// upstream's origin).
func newHandshakeClient() *http.Client {
	return &http.Client{
		Timeout: handshakeTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: handshakeTimeout,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
	}
}

// hopByHop are the headers of one connection (RFC 9110 §7.6.1).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopByHop(hdr http.Header) {
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

// capturedResponse is an upstream response read into memory.
type capturedResponse struct {
	status   int
	header   http.Header
	body     []byte
	overflow bool
}

// writeTo relays the response unchanged.
func (c *capturedResponse) writeTo(w http.ResponseWriter) {
	hdr := w.Header()
	for k, v := range c.header {
		hdr[k] = v
	}
	hdr.Set("Content-Length", strconv.Itoa(len(c.body)))
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body)
}

// captureWriter collects a response from next, up to maxHandshakeResponse.
// Used only for handshake responses (small JSON); everything else streams.
type captureWriter struct {
	resp capturedResponse
}

func (c *captureWriter) Header() http.Header { return c.resp.header }

func (c *captureWriter) WriteHeader(code int) {
	if code < 200 && code != http.StatusSwitchingProtocols {
		return // informational; the final status follows
	}
	if c.resp.status == 0 {
		c.resp.status = code
	}
}

func (c *captureWriter) Write(p []byte) (int, error) {
	if c.resp.status == 0 {
		c.resp.status = http.StatusOK
	}
	if len(c.resp.body)+len(p) > maxHandshakeResponse {
		c.resp.overflow = true
		return 0, errResponseTooLarge
	}
	c.resp.body = append(c.resp.body, p...)
	return len(p), nil
}

// Flush is a no-op: the response is held until complete.
func (c *captureWriter) Flush() {}
