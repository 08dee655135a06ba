package toolpolicy

import (
	"errors"
	"mime"
	"net/http"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
)

// Refusals of requests whose body the tool policy will not read (policeHTTP).
var (
	errBodylessMethod = errors.New("mcpi: a body on a GET, HEAD, OPTIONS, DELETE or TRACE request is refused where a tool policy applies")
	errConnect        = errors.New("mcpi: CONNECT is refused where a tool policy applies: the edge cannot police a tunnel")
	errBodyEncoded    = errors.New("mcpi: a request body with a Content-Encoding is refused where a tool policy applies")
	errBodyCharset    = errors.New("mcpi: where a tool policy applies, a request body needs one well-formed Content-Type, naming no charset but UTF-8")
)

// policeHTTP is what a tool policy requires of a request before its body is
// read: everything the upstream may read as JSON-RPC must be what the edge
// reads. It returns the status to refuse r with, and why; or it may change
// r so that nothing unpoliced goes on:
//
//   - A protocol upgrade (WebSocket, h2c) would open a tunnel the edge
//     cannot see into: the Upgrade header is removed, so the request goes
//     on as a plain one (RFC 9110 §7.8 lets a server ignore it). CONNECT
//     (HTTP/2 and HTTP/3 WebSockets) gets 400.
//   - GET, HEAD, OPTIONS, DELETE and TRACE carry no JSON-RPC: one with a
//     declared body gets 400, and a body of unknown length (HTTP/2 and
//     HTTP/3 send bodyless GETs that way) is dropped, never read, so a GET
//     stream is not held up.
//   - Any other method's body is read and parsed as JSON-RPC whatever its
//     media type (or none), but a body in another charset than UTF-8, or
//     with a Content-Encoding, gets 415: an upstream that decodes it (such
//     as a Node.js server decoding charset=utf-7 or inflating gzip) would
//     read other JSON than the edge did. read is whether the carriers
//     already read the body.
func (p *Policy) policeHTTP(r *http.Request, method string, read bool) (int, error) {
	if method == http.MethodConnect {
		return http.StatusBadRequest, errConnect
	}
	if r.Header.Get("Upgrade") != "" {
		if c := p.parts.Logger.Check(zapcore.DebugLevel, "protocol upgrade ignored under the tool policy"); c != nil {
			c.Write(zap.String("upgrade", r.Header.Get("Upgrade")))
		}
		r.Header.Del("Upgrade")
	}
	if carrier.Bodyless(method) {
		switch {
		case r.ContentLength > 0:
			return http.StatusBadRequest, errBodylessMethod
		case r.ContentLength < 0:
			r.Body, r.ContentLength, r.TransferEncoding, r.GetBody = http.NoBody, 0, nil, nil
			r.Header.Del("Transfer-Encoding")
		}
		return 0, nil
	}
	if !read && !carrier.HasBody(r) {
		return 0, nil
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for ce := range strings.SplitSeq(v, ",") {
			if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
				return http.StatusUnsupportedMediaType, errBodyEncoded
			}
		}
	}
	switch cts := r.Header.Values("Content-Type"); len(cts) {
	case 0:
	case 1:
		if cts[0] != "" && !utf8Charset(cts[0]) {
			return http.StatusUnsupportedMediaType, errBodyCharset
		}
	default:
		return http.StatusUnsupportedMediaType, errBodyCharset
	}
	return 0, nil
}

// bodyRefusal answers a request the tool policy will not authorize because
// it cannot read it, with a JSON-RPC error (id null). The request stays
// recorded as its admission adm: the credential was good, the body is
// what the policy cannot read.
func bodyRefusal(status, code int, err error, adm observe.Decision) *refusal.Refusal {
	rf := refusal.JSONRPC(status, "body_unreadable", nil, code, err.Error(), err)
	rf.Decision, rf.Log = &adm, "request body refused by tool policy"
	if errors.Is(err, errBodyEncoded) {
		rf.Header = http.Header{"Accept-Encoding": {"identity"}}
	}
	return rf
}

// utf8Charset reports whether the Content-Type ct is well-formed with no
// charset but UTF-8, as mime.ParseMediaType reads it. A value without
// parameters, as clients send it, is checked without the map of
// parameters mime allocates: carrier.MediaType refuses exactly the types
// mime does (FuzzUTF8Charset).
func utf8Charset(ct string) bool {
	if !strings.Contains(ct, ";") {
		return carrier.MediaType(ct) != ""
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}
