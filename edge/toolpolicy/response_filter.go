package toolpolicy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// Response filtering: tools/list answers lose the tools the caller may not
// call, handshake actions in tool results are checked, and so are the URL
// elicitations of any answer (docs/protocol/mcpi.md#handshake-actions). An application/json answer is held until its JSON value is complete
// (bounded by max_response_size), rewritten and sent with a new
// Content-Length; a text/event-stream answer goes through mcp's SSE
// rewriter event by event, each event flushed as soon as it is complete, so
// streams keep streaming. Anything else passes untouched.

var (
	errResponseNotJSON   = errors.New("response is not a JSON object or array")
	errResponseEncoded   = errors.New("response has a Content-Encoding")
	errResponseMediaType = errors.New("response is neither application/json nor text/event-stream")
	errResponseOversize  = errors.New("response larger than max_response_size")
)

type filterState uint8

const (
	fsNew    filterState = iota
	fsPass               // headers sent; the body passes untouched
	fsJSON               // holding an application/json body
	fsSSE                // streaming through the SSE rewriter
	fsDone               // the (rewritten) answer is sent; later bytes are dropped
	fsFailed             // the SSE stream failed; writes return err
	fsHeld               // unreadable headers held until a byte comes (a bodiless 202 passes, finish)
)

// responseFilter is the http.ResponseWriter handed to the rest of the route
// for a request whose response c must check. It is used from one goroutine
// at a time, like any ResponseWriter.
type responseFilter struct {
	http.ResponseWriter
	check *responseCheck
	max   int

	state  filterState
	status int
	buf    []byte
	scan   jsonValueEnd
	sse    io.WriteCloser
	err    error
	extra  bool // bytes after the JSON value were dropped (logged once)
	// upstreamLength is the upstream's Content-Length of a held answer.
	upstreamLength []string
	heldErr        error // why an answer in fsHeld cannot be read
}

func (f *responseFilter) WriteHeader(code int) {
	if f.state != fsNew {
		return // superfluous, as net/http would say
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		f.ResponseWriter.WriteHeader(code) // informational: headers to come
		return
	}
	hdr := f.Header()
	mt := carrier.MediaType(hdr.Get("Content-Type"))
	// Every 2xx but 204 may carry a body a client reads: fetch and the
	// SDKs read 205 and 206 answers as any other.
	withBody := code >= 200 && code < 300 && code != http.StatusNoContent
	sse := mt == "text/event-stream"
	if !withBody {
		f.state = fsPass
		f.ResponseWriter.WriteHeader(code)
		return
	}
	if !sse && !carrier.IsJSONMediaType(mt) {
		// Exactly JSON or an event stream, or not checked: clients find
		// JSON in "text/plain; x=application/json" too (the TypeScript
		// SDK only looks for the substring), so an answer that must be
		// checked and is of any other type is withheld.
		f.hold(code, errResponseMediaType)
		return
	}
	if ce := hdr.Get("Content-Encoding"); ce != "" && ce != "identity" {
		f.hold(code, errResponseEncoded)
		return
	}
	// The body may be rewritten; the upstream's length is kept for an
	// answer sent as it came (send).
	f.upstreamLength = hdr["Content-Length"]
	hdr.Del("Content-Length")
	if !sse {
		f.status = code
		f.state = fsJSON
		return
	}
	f.state = fsSSE
	f.ResponseWriter.WriteHeader(code)
	opts := []mcp.SSEOption{mcp.WithMaxEventSize(f.max), mcp.WithFlush(f.flushUnder)}
	if f.check.mayPassUnchecked() {
		opts = append(opts, mcp.WithOversizePassthrough())
	}
	f.sse = mcp.NewSSERewriter(f.ResponseWriter, f.check.rewrite, opts...)
}

// hold holds the headers of an answer of status code the edge cannot read
// (err says why) until its first byte: the answer to notifications alone
// is mostly a 202 without body or media type, with nothing to check.
func (f *responseFilter) hold(code int, err error) {
	f.status, f.heldErr, f.state = code, err, fsHeld
}

// finish ends the response once the rest of the route returned: an answer
// that wrote no body (held headers, or an application/json answer holding
// at most white space) had nothing to check and is sent as it came.
func (f *responseFilter) finish() {
	switch {
	case f.state == fsHeld:
		f.state = fsPass
		f.ResponseWriter.WriteHeader(f.status)
	case f.state == fsJSON && !f.scan.started && onlySpace(f.buf):
		f.state = fsPass
		if f.upstreamLength != nil {
			f.Header()["Content-Length"] = f.upstreamLength
		}
		f.ResponseWriter.WriteHeader(f.status)
		_, _ = f.ResponseWriter.Write(f.buf)
		f.buf = nil
	}
}

// Finish ends the response checker that w is or wraps, if any, once the
// rest of the route returned: an answer that wrote no body is sent as it
// came.
func Finish(w http.ResponseWriter) {
	for {
		switch v := w.(type) {
		case *responseFilter:
			v.finish()
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return
		}
	}
}

// unreadable answers an answer of status code that the edge cannot read
// (err says why): passed on unchecked when the check allows it, else
// withheld and replaced by the failure answer.
func (f *responseFilter) unreadable(code int, err error) {
	if f.check.mayPassUnchecked() {
		f.check.logUnchecked(err)
		f.state = fsPass
		f.ResponseWriter.WriteHeader(code)
		return
	}
	f.status = code
	f.fail(err)
}

func (f *responseFilter) Write(p []byte) (int, error) {
	switch f.state {
	case fsNew:
		f.WriteHeader(http.StatusOK)
		return f.Write(p)
	case fsPass:
		return f.ResponseWriter.Write(p)
	case fsHeld:
		if len(p) == 0 {
			return 0, nil
		}
		f.unreadable(f.status, f.heldErr)
		return f.Write(p)
	case fsJSON:
		f.writeJSON(p)
		return len(p), nil
	case fsSSE:
		n, err := f.sse.Write(p)
		if err != nil {
			f.failSSE(err)
			return n, err
		}
		return n, nil
	case fsFailed:
		return 0, f.err
	default: // fsDone
		if !f.extra && !onlySpace(p) {
			f.dropExtra()
		}
		return len(p), nil
	}
}

// writeJSON holds p until the JSON value is complete, then rewrites and
// sends it. A body that outgrows the limit or is not a JSON container is
// replaced by the failure answer (the rest of it is read and dropped so the
// upstream exchange ends normally), or passes unchecked if it may.
func (f *responseFilter) writeJSON(p []byte) {
	end, bad := f.scan.feed(p)
	switch {
	case end >= 0 && len(f.buf)+end <= f.max:
		// A body written in one piece is rewritten from p, which stays
		// valid until this Write returns, without a copy.
		body := p[:end]
		if len(f.buf) > 0 {
			body = append(f.buf, body...)
		}
		f.buf = nil
		out, err := f.check.rewrite(body)
		if err != nil {
			f.fail(err)
			break
		}
		f.send(f.status, out)
		if rest := p[end:]; !onlySpace(rest) {
			f.dropExtra()
		}
	case bad, len(f.buf)+len(p) > f.max:
		err := errResponseOversize
		if bad {
			err = errResponseNotJSON
		}
		if f.check.mayPassUnchecked() {
			f.check.logUnchecked(err)
			f.state = fsPass
			f.ResponseWriter.WriteHeader(f.status)
			held := f.buf
			f.buf = nil
			if _, err := f.ResponseWriter.Write(held); err == nil {
				_, _ = f.ResponseWriter.Write(p)
			}
			return
		}
		f.fail(err)
	default:
		f.buf = append(f.buf, p...)
	}
}

// dropExtra: the upstream wrote more after the JSON value that was sent
// on. A response signer after this filter still holds that value and
// withholds it (two documents are not one answer to sign).
func (f *responseFilter) dropExtra() {
	f.extra = true
	f.check.logWithheld(errors.New("bytes after the JSON value dropped"))
	proof.Withhold(f.ResponseWriter)
}

func (f *responseFilter) send(status int, body []byte) {
	f.state = fsDone
	f.buf = nil
	hdr := f.Header()
	if isLength(f.upstreamLength, len(body)) {
		// Unchanged, most answers are: the upstream's value, without
		// formatting and allocating another.
		hdr["Content-Length"] = f.upstreamLength
	} else {
		hdr.Set("Content-Length", strconv.Itoa(len(body)))
	}
	if status == 0 {
		status = http.StatusOK
	}
	f.ResponseWriter.WriteHeader(status)
	_, _ = f.ResponseWriter.Write(body) // an error means the client left
}

// fail sends the failure answer in place of a JSON response.
func (f *responseFilter) fail(err error) {
	f.check.logWithheld(err)
	hdr := f.Header()
	hdr.Del("Content-Encoding")
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	f.send(f.status, f.check.failBody(err))
}

// failSSE ends a stream the rewriter refused: a blank line ends any event
// begun before its data was refused (a client dispatches nothing for it),
// then one event answers the requests with a JSON-RPC error. The caller
// returns the error, so the proxy drops the stream.
func (f *responseFilter) failSSE(err error) {
	f.state, f.err = fsFailed, err
	f.check.logWithheld(err)
	b := append([]byte("\ndata: "), f.check.failBody(err)...)
	b = append(b, "\n\n"...)
	if _, werr := f.ResponseWriter.Write(b); werr == nil {
		_ = f.flushUnder()
	}
}

// flushUnder flushes the wrapped writer; one that cannot flush is fine.
func (f *responseFilter) flushUnder() error {
	err := http.NewResponseController(f.ResponseWriter).Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}

// Flush sends what is ready: a passed-through body, or the complete SSE
// events (the rewriter already flushed each). A held JSON body stays held,
// and so do headers not written yet: the media type that decides how the
// body is checked may still be set.
func (f *responseFilter) Flush() { _ = f.FlushError() }

// FlushError is Flush for http.ResponseController.
func (f *responseFilter) FlushError() error {
	switch f.state {
	case fsPass, fsSSE:
		return f.flushUnder()
	}
	return nil
}

// Hijack is refused: a hijacked connection would bypass the filter.
func (f *responseFilter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}

// Unwrap lets http.ResponseController reach the underlying writer for
// deadlines and full duplex.
func (f *responseFilter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// isLength reports whether the header values v are exactly one, the
// decimal n.
func isLength(v []string, n int) bool {
	var buf [20]byte
	return len(v) == 1 && v[0] == string(strconv.AppendInt(buf[:0], int64(n), 10))
}

func onlySpace(p []byte) bool {
	for _, c := range p {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// jsonValueEnd finds where the top-level JSON object or array of a body
// written in pieces ends, so the answer can be sent as soon as it is
// complete, without waiting for the end of the handler chain. It tracks
// only strings and nesting; the complete value is validated by mcp.
type jsonValueEnd struct {
	started, inString, escaped bool
	depth                      int
}

// feed scans the next piece and returns the offset in p just past the
// value's end, or -1; bad reports a body that does not start with an object
// or array.
func (s *jsonValueEnd) feed(p []byte) (end int, bad bool) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			if !s.started {
				return -1, true
			}
			s.inString = true
		case '{', '[':
			s.started = true
			s.depth++
		case '}', ']':
			if !s.started {
				return -1, true
			}
			if s.depth--; s.depth == 0 {
				return i + 1, false
			}
		default:
			if !s.started {
				return -1, true
			}
		}
	}
	return -1, false
}

// Interface guards
var (
	_ http.Flusher  = (*responseFilter)(nil)
	_ http.Hijacker = (*responseFilter)(nil)
)
