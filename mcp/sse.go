package mcp

import (
	"bytes"
	"io"
)

// DefaultMaxEventSize is the SSE rewriter's default limit on the buffered
// part of one event. Large tools/list answers (many tools with big schemas)
// stay well below it.
const DefaultMaxEventSize = 4 << 20

// SSEOption configures NewSSERewriter.
type SSEOption func(*sseRewriter)

// WithMaxEventSize sets the limit on the bytes buffered for one event (from
// its first data line to its closing blank line); n <= 0 keeps the default.
func WithMaxEventSize(n int) SSEOption {
	return func(s *sseRewriter) {
		if n > 0 {
			s.max = n
		}
	}
}

// WithOversizePassthrough makes an event larger than the limit stream
// through unmodified (and unseen by rewrite) instead of failing the stream.
// Only for observe-only uses: it lets whatever the rewrite would have
// removed reach the client.
func WithOversizePassthrough() SSEOption {
	return func(s *sseRewriter) { s.passOversize = true }
}

// WithFlush sets the function called after output was written, overriding
// the Flush method found on the writer.
func WithFlush(flush func() error) SSEOption {
	return func(s *sseRewriter) { s.flush = flush }
}

// NewSSERewriter returns a writer that parses the text/event-stream written
// to it (WHATWG HTML §9.2) and writes it to w with every event's data passed
// through rewrite. Events are written, and w flushed, as soon as they are
// complete, so streams keep their latency, and at most one event is held at
// a time. If w has a Flush() or Flush() error method (http.Flusher,
// bufio.Writer), it is called before each Write returns whenever output was
// written, which flushes every event without a flush per line.
//
// Parsing follows the specification: lines end in CRLF, LF or CR; a blank
// line ends an event; a "data" field's value (after "data:" and one optional
// space) is joined to the event's other data lines with "\n"; a leading
// UTF-8 BOM is skipped. rewrite sees that joined data; it must not retain
// its argument. It is not called for events without data lines (a client
// dispatches nothing for them) nor for events whose data is empty (such as
// the priming event "id: x\ndata:\n\n" MCP servers send): neither carries
// a message. Comments, other fields ("event", "id", "retry", unknown ones)
// and the line endings are kept as written. When rewrite returns its input
// unchanged the event is written byte for byte as received; otherwise the
// new data replaces the event's data lines at the position of the first
// one, as "data: <line>\n" per line (CR and CRLF in it also split lines).
// Empty new data drops the data lines, so clients dispatch nothing.
//
// An error from rewrite, or an event over the size limit (see
// WithMaxEventSize), fails the stream: the event's data is not written
// (lines before its first data line may have been), that Write and every
// later one return the error, and the caller should drop the connection. Failing closed is deliberate: the rewrite is a security
// filter, and an event it did not see must not reach the client. Use
// WithOversizePassthrough to let oversize events through instead.
//
// Close writes what is left of an unterminated last event (rewritten if it
// has data) without adding the blank line a client needs to dispatch it, and
// flushes. It does not close w. A nil rewrite passes events through. The
// writer is not safe for concurrent use.
func NewSSERewriter(w io.Writer, rewrite func(data []byte) ([]byte, error), opts ...SSEOption) io.WriteCloser {
	if rewrite == nil {
		rewrite = func(d []byte) ([]byte, error) { return d, nil }
	}
	s := &sseRewriter{w: w, rewrite: rewrite, max: DefaultMaxEventSize}
	switch f := w.(type) {
	case interface{ Flush() error }:
		s.flush = f.Flush
	case interface{ Flush() }:
		s.flush = func() error { f.Flush(); return nil }
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// sseLine is a complete line of the buffered event, as offsets into buf.
type sseLine struct {
	start, end int // the raw line, terminator included
	// For a data line, the value's offsets; vs < 0 for other lines.
	vs, ve int
}

type sseRewriter struct {
	w            io.Writer
	rewrite      func([]byte) ([]byte, error)
	flush        func() error
	max          int
	passOversize bool

	bomDone bool
	bomN    int // bytes of a possible leading BOM seen so far

	// buf holds the current event from its first data line on, then the
	// current partial line. Lines before the first data line are written
	// out as soon as they end: rewriting never changes or moves them.
	buf       []byte
	lines     []sseLine
	lineStart int // start of the partial line in buf
	hasData   bool

	// afterCR: the last byte consumed was a CR ending a line, at the end of
	// a Write; an LF starting the next Write belongs to that line ending.
	afterCR bool

	// passing: an oversize event is being streamed through; curLen is the
	// length of its current line (0 when a blank line would end it).
	passing bool
	curLen  int

	out     []byte // output of the current Write
	scratch []byte // joined data of multi-line events
	err     error
	closed  bool
}

func (s *sseRewriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.closed {
		return 0, ErrClosed
	}
	n := len(p)
	// A BOM is recognised only as the first bytes of the stream, possibly
	// split across writes; it is passed through.
	for !s.bomDone && len(p) > 0 {
		if p[0] != utf8BOM[s.bomN] {
			s.bomDone = true
			s.consume(utf8BOM[:s.bomN])
			break
		}
		s.bomN++
		p = p[1:]
		if s.bomN == len(utf8BOM) {
			s.bomDone = true
			s.out = append(s.out, utf8BOM...)
		}
	}
	rest := s.consume(p)
	if err := s.emit(); err != nil && s.err == nil {
		s.err = err
	}
	if s.err != nil {
		return n - rest, s.err
	}
	return n, nil
}

// consume parses p, appending output to s.out, and returns how many bytes
// of p were left unconsumed because of an error (in s.err).
func (s *sseRewriter) consume(p []byte) int {
	for len(p) > 0 && s.err == nil {
		if s.afterCR {
			s.afterCR = false
			if p[0] == '\n' {
				if !s.passing && len(s.lines) > 0 && s.lineStart == len(s.buf) {
					// The line is still buffered: extend its ending.
					s.buf = append(s.buf, '\n')
					s.lines[len(s.lines)-1].end++
					s.lineStart++
				} else {
					s.out = append(s.out, '\n')
				}
				p = p[1:]
				continue
			}
		}
		k := bytes.IndexAny(p, "\r\n")
		if k < 0 {
			s.partial(p)
			return 0
		}
		s.partial(p[:k])
		if s.err != nil {
			return len(p) - k
		}
		term := 1
		if p[k] == '\r' {
			switch {
			case k+1 == len(p):
				s.afterCR = true
			case p[k+1] == '\n':
				term = 2
			}
		}
		s.endLine(p[k : k+term])
		p = p[k+term:]
	}
	if s.err != nil {
		return len(p)
	}
	return 0
}

// partial takes bytes of the current line (no line ending).
func (s *sseRewriter) partial(b []byte) {
	if len(b) == 0 {
		return
	}
	if s.passing {
		s.out = append(s.out, b...)
		s.curLen += len(b)
		return
	}
	s.buf = append(s.buf, b...)
	if len(s.buf) <= s.max {
		return
	}
	if !s.passOversize {
		s.err = ErrEventTooLarge
		return
	}
	// Stream the rest of this event through untouched.
	s.out = append(s.out, s.buf...)
	s.passing = true
	s.curLen = len(s.buf) - s.lineStart
	s.resetEvent()
}

// endLine ends the current line with the line ending term.
func (s *sseRewriter) endLine(term []byte) {
	if s.passing {
		s.out = append(s.out, term...)
		if s.curLen == 0 {
			s.passing = false
		}
		s.curLen = 0
		return
	}
	content := s.buf[s.lineStart:]
	if len(content) == 0 {
		// A blank line: the event is complete.
		s.buf = append(s.buf, term...)
		s.lines = append(s.lines, sseLine{start: s.lineStart, end: len(s.buf), vs: -1})
		s.finishEvent(true)
		return
	}
	vs, ve := -1, -1
	if v, ok := dataValue(content); ok {
		vs = s.lineStart + (len(content) - len(v))
		ve = s.lineStart + len(content)
	}
	if vs < 0 && !s.hasData {
		// Before the first data line, nothing can change: write it now,
		// so comments used as keep-alives are not held back.
		s.out = append(s.out, content...)
		s.out = append(s.out, term...)
		s.buf = s.buf[:s.lineStart]
		return
	}
	s.hasData = s.hasData || vs >= 0
	s.buf = append(s.buf, term...)
	s.lines = append(s.lines, sseLine{start: s.lineStart, end: len(s.buf), vs: vs, ve: ve})
	s.lineStart = len(s.buf)
}

// dataValue returns the value of a "data" field line.
func dataValue(line []byte) ([]byte, bool) {
	const name = "data"
	if !bytes.HasPrefix(line, []byte(name)) {
		return nil, false
	}
	rest := line[len(name):]
	if len(rest) == 0 {
		return rest, true
	}
	if rest[0] != ':' {
		return nil, false
	}
	rest = rest[1:]
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	return rest, true
}

// finishEvent writes the buffered event, rewriting its data. terminated is
// false at Close, for an event that never got its blank line.
func (s *sseRewriter) finishEvent(terminated bool) {
	defer s.resetEvent()
	if !terminated && s.lineStart < len(s.buf) {
		// Close: treat the partial line as a (final) line.
		content := s.buf[s.lineStart:]
		vs, ve := -1, -1
		if v, ok := dataValue(content); ok {
			vs, ve = len(s.buf)-len(v), len(s.buf)
		}
		s.hasData = s.hasData || vs >= 0
		s.lines = append(s.lines, sseLine{start: s.lineStart, end: len(s.buf), vs: vs, ve: ve})
	}
	data := s.data()
	if !s.hasData || len(data) == 0 {
		s.out = append(s.out, s.buf...)
		return
	}
	nd, err := s.rewrite(data)
	if err != nil {
		s.err = err
		return
	}
	if bytes.Equal(nd, data) {
		s.out = append(s.out, s.buf...)
		return
	}
	first := true
	for _, l := range s.lines {
		if l.vs < 0 {
			line := s.buf[l.start:l.end]
			// A line ended by a lone CR may have been followed by a data
			// line that is now gone; the event's blank line, if it is a
			// lone LF, would then merge with that CR into one CRLF ending
			// and the event would never end. Ending the CR line with CRLF
			// (one line ending to a client) keeps the blank line.
			if line[0] == '\n' && len(s.out) > 0 && s.out[len(s.out)-1] == '\r' {
				s.out = append(s.out, '\n')
			}
			s.out = append(s.out, line...)
			continue
		}
		if first && len(nd) > 0 {
			s.out = appendDataLines(s.out, nd)
		}
		first = false
	}
}

// data returns the event's joined data.
func (s *sseRewriter) data() []byte {
	var one []byte
	n := 0
	for _, l := range s.lines {
		if l.vs >= 0 {
			if n == 0 {
				one = s.buf[l.vs:l.ve]
			}
			n++
		}
	}
	if n <= 1 {
		return one
	}
	s.scratch = s.scratch[:0]
	n = 0
	for _, l := range s.lines {
		if l.vs >= 0 {
			if n > 0 {
				s.scratch = append(s.scratch, '\n')
			}
			s.scratch = append(s.scratch, s.buf[l.vs:l.ve]...)
			n++
		}
	}
	return s.scratch
}

// appendDataLines appends data as "data:" lines, splitting it where a
// client would split it (CRLF, LF, CR).
func appendDataLines(out, data []byte) []byte {
	for {
		k := bytes.IndexAny(data, "\r\n")
		line := data
		if k >= 0 {
			line = data[:k]
		}
		out = append(out, "data:"...)
		if len(line) > 0 {
			out = append(out, ' ')
			out = append(out, line...)
		}
		out = append(out, '\n')
		if k < 0 {
			return out
		}
		if data[k] == '\r' && k+1 < len(data) && data[k+1] == '\n' {
			k++
		}
		data = data[k+1:]
	}
}

func (s *sseRewriter) resetEvent() {
	// Do not pin the memory of one huge event for the rest of the stream.
	if cap(s.buf) > 64<<10 {
		s.buf = nil
	} else {
		s.buf = s.buf[:0]
	}
	if cap(s.scratch) > 64<<10 {
		s.scratch = nil
	}
	s.lines = s.lines[:0]
	s.lineStart = 0
	s.hasData = false
}

// emit writes s.out to w and flushes.
func (s *sseRewriter) emit() error {
	if len(s.out) == 0 {
		return nil
	}
	_, err := s.w.Write(s.out)
	if cap(s.out) > 64<<10 {
		s.out = nil
	} else {
		s.out = s.out[:0]
	}
	if err != nil {
		return err
	}
	if s.flush != nil {
		return s.flush()
	}
	return nil
}

func (s *sseRewriter) Close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	if s.err != nil {
		return s.err
	}
	if !s.bomDone {
		s.bomDone = true
		s.consume(utf8BOM[:s.bomN])
	}
	if s.err == nil && !s.passing && len(s.buf) > 0 {
		s.finishEvent(false)
	}
	if err := s.emit(); err != nil && s.err == nil {
		s.err = err
	}
	return s.err
}
