package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func BenchmarkToolCallName(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_documents",` +
		`"arguments":{"query":"quarterly revenue by region","limit":20,"filters":{"year":[2024,2025],"type":"pdf"}},` +
		`"_meta":{"progressToken":"p-42"}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, _, err := ParseMessages(body)
		if err != nil {
			b.Fatal(err)
		}
		if name, ok := ToolCallName(msgs[0]); !ok || name != "search_documents" {
			b.Fatal(name)
		}
	}
}

// toolsListResult returns a tools/list result with n realistic tools.
func toolsListResult(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"tools":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"tool_%d","title":"Tool %d","description":"Does thing %d with the given input and returns a summary.",`+
			`"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What to look for"},`+
			`"limit":{"type":"integer","minimum":1,"maximum":100},"tags":{"type":"array","items":{"type":"string"}}},"required":["query"]},`+
			`"annotations":{"readOnlyHint":%v,"openWorldHint":false},"_meta":{"vendor":"x"}}`, i, i, i, i%2 == 0)
	}
	sb.WriteString(`],"nextCursor":"page-2"}`)
	return []byte(sb.String())
}

func BenchmarkFilterToolsList(b *testing.B) {
	result := toolsListResult(50)
	allow := func(name string) bool { return len(name)%2 == 0 } // tool_10..tool_49 kept
	b.SetBytes(int64(len(result)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := FilterToolsList(result, allow)
		if err != nil || len(out) >= len(result) {
			b.Fatal(err)
		}
	}
}

func BenchmarkSSERewriter(b *testing.B) {
	ids := map[string]string{IDKey(json.RawMessage(`1`)): MethodToolsList}
	allow := func(name string) bool { return name != "tool_3" }
	var stream bytes.Buffer
	stream.WriteString(": stream start\n\n")
	for i := range 20 {
		fmt.Fprintf(&stream, "id: e%d\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":%d}}\n\n", i, i)
	}
	fmt.Fprintf(&stream, "id: last\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":%s}\n\n", toolsListResult(10))
	in := stream.Bytes()
	rewrite := func(d []byte) ([]byte, error) { return FilterResponseBody(d, ids, allow) }
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		w := NewSSERewriter(io.Discard, rewrite)
		// Network-sized writes, so events straddle them.
		for p := in; len(p) > 0; {
			n := min(len(p), 1400)
			if _, err := w.Write(p[:n]); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckResponseBody: a plain 4 KB tool result, which the byte
// pre-check lets skip the strict reading, and an input-required one.
func BenchmarkCheckResponseBody(b *testing.B) {
	opts := ActionOptions{ToolEndpointHost: "mcp.example.com", Era: Era2026}
	plain := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 340) + `"}]}}`)
	ir := []byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":"https://login.example.com/x","elicitationId":"e"}}},"content":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 340) + `"}]}}`)
	for _, bc := range []struct {
		name string
		body []byte
	}{{"plain", plain}, {"input_required", ir}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if _, _, err := CheckResponseBody(bc.body, nil, opts, ActionsEnforce); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckFraming is the framing check of a 2026-era tools/call, the
// headers mirroring the body (the whole-proxy bench's b-2026), after its
// strict parse.
func BenchmarkCheckFraming(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	h := http.Header{}
	h.Set(HeaderProtocolVersion, Version2026)
	h.Set(HeaderMethod, MethodToolsCall)
	h.Set(HeaderName, "greet")
	msgs, batch, err := ParseStrict(body)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if era, err := CheckFraming(h, msgs, batch); err != nil || era != Era2026 {
			b.Fatal(era, err)
		}
	}
}

// BenchmarkFilterThenCheck is the response check of a route with a tool
// policy and the action check (BenchmarkHotPath/e-tool) on a small tool
// result: the tool-list filter, then the action check, on one body.
func BenchmarkFilterThenCheck(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`)
	ids := map[string]string{"1": MethodToolsCall}
	allow := func(string) bool { return true }
	opts := ActionOptions{ToolEndpointHost: "mcp.example.com", Era: Era2025}
	b.ReportAllocs()
	for b.Loop() {
		out, read, err := FilterResponseBodyRead(Era2025, body, ids, allow)
		if err != nil || !read {
			b.Fatal(err)
		}
		if _, _, err := CheckReadResponseBody(out, ids, opts, ActionsEnforce); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseStrict is the strict reading of BenchmarkHotPath/b-2026's
// body (the framing check's, shared by every later step).
func BenchmarkParseStrict(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseStrict(body); err != nil {
			b.Fatal(err)
		}
	}
}
