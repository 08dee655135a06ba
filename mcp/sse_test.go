package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// sseEvent is an event as a WHATWG-conforming client dispatches it.
type sseEvent struct{ Type, Data, ID string }

// parseSSE is a reference parser, written from the specification (HTML
// §9.2.6) for whole streams, to check the incremental one against.
func parseSSE(stream []byte) []sseEvent {
	stream = bytes.TrimPrefix(stream, utf8BOM)
	var events []sseEvent
	var data, typ strings.Builder
	var lastID string
	for len(stream) > 0 {
		k := bytes.IndexAny(stream, "\r\n")
		if k < 0 {
			break // an unterminated last line is never processed
		}
		line := string(stream[:k])
		if stream[k] == '\r' && k+1 < len(stream) && stream[k+1] == '\n' {
			k++
		}
		stream = stream[k+1:]
		if line == "" {
			// The emptiness check comes before the trailing LF is
			// removed: "data:" alone dispatches an event with data "".
			if data.Len() == 0 {
				typ.Reset()
				continue
			}
			d := strings.TrimSuffix(data.String(), "\n")
			ty := typ.String()
			if ty == "" {
				ty = "message"
			}
			events = append(events, sseEvent{Type: ty, Data: d, ID: lastID})
			data.Reset()
			typ.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ.Reset()
			typ.WriteString(value)
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		}
	}
	return events
}

// flushRecorder records writes and flushes.
type flushRecorder struct {
	bytes.Buffer
	flushes int
	// atFlush is the buffer length at each flush.
	atFlush []int
}

func (f *flushRecorder) Flush() {
	f.flushes++
	f.atFlush = append(f.atFlush, f.Len())
}

// runSSE writes input in chunks of the given sizes (the rest in one write)
// and closes the rewriter.
func runSSE(t testing.TB, input []byte, rewrite func([]byte) ([]byte, error), chunks []int, opts ...SSEOption) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	w := NewSSERewriter(&out, rewrite, opts...)
	for _, n := range chunks {
		n = min(n, len(input))
		if _, err := w.Write(input[:n]); err != nil {
			return out.Bytes(), err
		}
		input = input[n:]
	}
	if len(input) > 0 {
		if _, err := w.Write(input); err != nil {
			return out.Bytes(), err
		}
	}
	err := w.Close()
	return out.Bytes(), err
}

func identity(d []byte) ([]byte, error) { return d, nil }

func wrap(d []byte) ([]byte, error) { return []byte("<" + string(d) + ">"), nil }

var sseInputs = []string{
	"data: hello\n\n",
	"event: message\nid: 1\ndata: {\"a\":1}\n\n",
	"data: a\r\ndata: b\r\n\r\n",
	"data: a\rdata: b\r\rdata: c\r\n\r\n",
	": keepalive\n\n: comment\ndata: x\n: inner comment\nid: 7\n\n",
	"retry: 1000\n\nid: prime\ndata:\n\n",
	"data\n\ndata:no-space\n\ndata:  two-spaces\n\n",
	"\xEF\xBB\xBFdata: bom\n\n",
	"\xEF\xBBdata: not a bom\n\n",
	"data: a\n\n\n\n\ndata: b\n\n",
	"data: x\r\n\r\ndata: y\r\r\ndata: z\n\r\n",
	"unknown: field\ndata: d\nData: not data\n\n",
	"data: unterminated event\n",
	"data: unterminated line",
	": only a comment",
	"",
	"\r\n\r\n\n\r",
	"id: a\x00b\ndata: nul\n\n",
	"data: caf\xc3\xa9 \xff\xfe\n\n",
}

func TestSSEIdentityEveryBoundary(t *testing.T) {
	for _, in := range sseInputs {
		input := []byte(in)
		whole, err := runSSE(t, input, identity, nil)
		if err != nil || !bytes.Equal(whole, input) {
			t.Fatalf("%q: one write gives %q, %v", in, whole, err)
		}
		// One byte at a time.
		ones := make([]int, len(input))
		for i := range ones {
			ones[i] = 1
		}
		if got, err := runSSE(t, input, identity, ones); err != nil || !bytes.Equal(got, input) {
			t.Errorf("%q: byte by byte gives %q, %v", in, got, err)
		}
		// Every split into two writes, for the identity and for a rewrite.
		wrapped, err := runSSE(t, input, wrap, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i <= len(input); i++ {
			if got, err := runSSE(t, input, identity, []int{i}); err != nil || !bytes.Equal(got, input) {
				t.Errorf("%q split at %d: identity gives %q, %v", in, i, got, err)
			}
			if got, err := runSSE(t, input, wrap, []int{i}); err != nil || !bytes.Equal(got, wrapped) {
				t.Errorf("%q split at %d: rewrite gives %q, one write %q, %v", in, i, got, wrapped, err)
			}
		}
		if got, err := runSSE(t, input, wrap, ones); err != nil || !bytes.Equal(got, wrapped) {
			t.Errorf("%q: byte by byte rewrite gives %q, want %q, %v", in, got, wrapped, err)
		}
	}
}

func TestSSERewriteEvents(t *testing.T) {
	for _, in := range sseInputs {
		out, err := runSSE(t, []byte(in), wrap, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := parseSSE([]byte(in))
		for i := range want {
			if want[i].Data != "" { // empty data is not passed to rewrite
				want[i].Data = "<" + want[i].Data + ">"
			}
		}
		if got := parseSSE(out); !slices.Equal(got, want) {
			t.Errorf("%q: rewritten stream %q has events %q, want %q", in, out, got, want)
		}
	}
}

func TestSSERewriteOutput(t *testing.T) {
	upper := func(d []byte) ([]byte, error) { return bytes.ToUpper(d), nil }
	tests := []struct {
		name, in, want string
		rewrite        func([]byte) ([]byte, error)
	}{
		{"lf", "data: a\n\n", "data: A\n\n", upper},
		{"crlf keeps other line endings", "event: e\r\ndata: a\r\nid: 1\r\n\r\n", "event: e\r\ndata: A\nid: 1\r\n\r\n", upper},
		{"cr", "data: a\rdata: b\r\r", "data: A\ndata: B\n\r", upper},
		{"multi-line data replaced at the first data line", ": c\ndata: a\nid: 5\ndata: b\n\n", ": c\ndata: A\ndata: B\nid: 5\n\n", upper},
		{"no space after colon", "data:a\n\n", "data: A\n\n", upper},
		{"comments and fields untouched", ": x\nretry: 10\n\n", ": x\nretry: 10\n\n", upper},
		{"single empty data line not rewritten", "data:\n\n", "data:\n\n", upper},
		{"two empty data lines are an event", "data\ndata\n\n", "data: x\n\n", func(d []byte) ([]byte, error) {
			if string(d) != "\n" {
				return nil, fmt.Errorf("data %q", d)
			}
			return []byte("x"), nil
		}},
		{"rewritten data with line breaks", "data: a\n\n", "data: 1\ndata: 2\ndata: 3\ndata:\ndata: 4\n\n", func([]byte) ([]byte, error) { return []byte("1\r\n2\r3\n\n4"), nil }},
		{"empty rewrite drops the data lines", "id: 1\ndata: a\ndata: b\nevent: e\n\n", "id: 1\nevent: e\n\n", func([]byte) ([]byte, error) { return nil, nil }},
		{"unterminated event at close is rewritten, not completed", "id: 1\ndata: a", "id: 1\ndata: A\n", upper},
		{"bom kept", "\xEF\xBB\xBFdata: a\n\n", "\xEF\xBB\xBFdata: A\n\n", upper},
		{"Data is not data", "Data: a\n\n", "Data: a\n\n", upper},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runSSE(t, []byte(tt.in), tt.rewrite, nil)
			if err != nil || string(got) != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSSEOversize(t *testing.T) {
	big := "data: " + strings.Repeat("x", 100) + "\n\n"
	in := ": hi\n\n" + big + "data: small\n\n"
	t.Run("fails closed", func(t *testing.T) {
		var out bytes.Buffer
		w := NewSSERewriter(&out, wrap, WithMaxEventSize(50))
		n, err := w.Write([]byte(in))
		if !errors.Is(err, ErrEventTooLarge) || n >= len(in) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if strings.Contains(out.String(), "xxx") {
			t.Errorf("oversize data leaked: %q", out.String())
		}
		if out.String() != ": hi\n\n" {
			t.Errorf("events before the oversize one: %q", out.String())
		}
		if _, err := w.Write([]byte("data: later\n\n")); !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("later Write: %v", err)
		}
		if err := w.Close(); !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("Close: %v", err)
		}
		if strings.Contains(out.String(), "later") {
			t.Error("wrote after failing")
		}
	})
	t.Run("fails closed across writes", func(t *testing.T) {
		ones := make([]int, len(in))
		for i := range ones {
			ones[i] = 1
		}
		out, err := runSSE(t, []byte(in), wrap, ones, WithMaxEventSize(50))
		if !errors.Is(err, ErrEventTooLarge) || strings.Contains(string(out), "xxx") {
			t.Errorf("got %q, %v", out, err)
		}
	})
	t.Run("passthrough", func(t *testing.T) {
		var calls []string
		rw := func(d []byte) ([]byte, error) {
			calls = append(calls, string(d))
			return wrap(d)
		}
		for _, chunks := range [][]int{nil, {1, 1, 1, 7, 3, 60, 1, 1, 30}} {
			calls = nil
			out, err := runSSE(t, []byte(in), rw, chunks, WithMaxEventSize(50), WithOversizePassthrough())
			want := ": hi\n\n" + big + "data: <small>\n\n"
			if err != nil || string(out) != want {
				t.Errorf("chunks %v: got %q, %v", chunks, out, err)
			}
			if len(calls) != 1 || calls[0] != "small" {
				t.Errorf("rewrite calls %q", calls)
			}
		}
	})
	t.Run("passthrough with crlf", func(t *testing.T) {
		in := "data: " + strings.Repeat("y", 60) + "\r\ndata: more\r\n\r\ndata: s\r\n\r\n"
		for i := 0; i <= len(in); i++ {
			out, err := runSSE(t, []byte(in), wrap, []int{i}, WithMaxEventSize(20), WithOversizePassthrough())
			want := "data: " + strings.Repeat("y", 60) + "\r\ndata: more\r\n\r\ndata: <s>\n\r\n"
			if err != nil || string(out) != want {
				t.Fatalf("split %d: got %q, %v", i, out, err)
			}
		}
	})
	t.Run("the limit is per event", func(t *testing.T) {
		in := strings.Repeat("data: 0123456789\n\n", 100)
		out, err := runSSE(t, []byte(in), identity, nil, WithMaxEventSize(20))
		if err != nil || string(out) != in {
			t.Errorf("got %v", err)
		}
	})
}

func TestSSERewriteError(t *testing.T) {
	boom := errors.New("boom")
	rw := func(d []byte) ([]byte, error) {
		if string(d) == "bad" {
			return nil, boom
		}
		return wrap(d)
	}
	var out bytes.Buffer
	w := NewSSERewriter(&out, rw)
	in := "data: ok\n\nevent: e\ndata: bad\n\ndata: after\n\n"
	n, err := w.Write([]byte(in))
	if !errors.Is(err, boom) || n >= len(in) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if strings.Contains(out.String(), "bad") || strings.Contains(out.String(), "after") || !strings.HasPrefix(out.String(), "data: <ok>\n\n") {
		t.Errorf("output %q", out.String())
	}
	if _, err := w.Write([]byte("data: x\n\n")); !errors.Is(err, boom) {
		t.Errorf("later Write: %v", err)
	}
}

func TestSSEFlush(t *testing.T) {
	rec := &flushRecorder{}
	w := NewSSERewriter(rec, wrap)
	write := func(s string) {
		t.Helper()
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write("data: a")
	if rec.Len() != 0 || rec.flushes != 0 {
		t.Fatalf("partial event written: %q, %d flushes", rec.String(), rec.flushes)
	}
	write("\n\n")
	if rec.String() != "data: <a>\n\n" || rec.flushes != 1 {
		t.Fatalf("complete event: %q, %d flushes", rec.String(), rec.flushes)
	}
	// A keep-alive comment goes out at once, before any blank line.
	write(": ping\n")
	if rec.String() != "data: <a>\n\n: ping\n" || rec.flushes != 2 {
		t.Fatalf("keepalive: %q, %d flushes", rec.String(), rec.flushes)
	}
	write("data: b\n")
	if rec.flushes != 2 {
		t.Fatalf("flushed without output: %d", rec.flushes)
	}
	write("\ndata: c\n\ndata: d\n\n")
	if rec.flushes != 3 || !strings.HasSuffix(rec.String(), "data: <b>\n\ndata: <c>\n\ndata: <d>\n\n") {
		t.Fatalf("several events: %q, %d flushes", rec.String(), rec.flushes)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.Write([]byte("data: x\n\n")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}

	// WithFlush overrides the writer's method; Flush() error is found too.
	calls := 0
	var buf bytes.Buffer
	w = NewSSERewriter(&buf, identity, WithFlush(func() error { calls++; return nil }))
	if _, err := w.Write([]byte("data: a\n\n")); err != nil || calls != 1 {
		t.Errorf("WithFlush: %d calls, %v", calls, err)
	}
	ef := &errFlusher{err: errors.New("gone")}
	w = NewSSERewriter(ef, identity)
	if _, err := w.Write([]byte("data: a\n\n")); !errors.Is(err, ef.err) {
		t.Errorf("Flush error not returned: %v", err)
	}
}

type errFlusher struct {
	bytes.Buffer
	err error
}

func (e *errFlusher) Flush() error { return e.err }

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestSSEWriterError(t *testing.T) {
	fail := errors.New("broken pipe")
	w := NewSSERewriter(failWriter{fail}, identity)
	if _, err := w.Write([]byte("data: a\n\n")); !errors.Is(err, fail) {
		t.Errorf("Write: %v", err)
	}
	if _, err := w.Write([]byte("data: a\n\n")); !errors.Is(err, fail) {
		t.Errorf("second Write: %v", err)
	}
	if err := w.Close(); !errors.Is(err, fail) {
		t.Errorf("Close: %v", err)
	}
}

func TestSSEToolsListFilter(t *testing.T) {
	// The intended use: filter tools/list answers inside a stream.
	ids := map[string]string{IDKey([]byte(`1`)): MethodToolsList}
	rw := func(d []byte) ([]byte, error) { return FilterResponseBody(d, ids, allowOnly("a")) }
	in := "id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"},{\"name\":\"secret\"}]}}\n\n"
	out, err := runSSE(t, []byte(in), rw, []int{20, 40})
	want := "id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"}]}}\n\n"
	if err != nil || string(out) != want {
		t.Errorf("got %q, %v", out, err)
	}
}

func TestSSENilRewrite(t *testing.T) {
	in := "id: 1\ndata: a\r\n\r\n: c\n"
	out, err := runSSE(t, []byte(in), nil, []int{3})
	if err != nil || string(out) != in {
		t.Errorf("got %q, %v", out, err)
	}
}
