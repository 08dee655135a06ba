package mcp

import "testing"

// BenchmarkFilterToolsListAnswer is the filter on a clean 50-tool tools/list
// answer as the edge gets it (a JSON-RPC body, the request's ids): the
// strict reading included.
func BenchmarkFilterToolsListAnswer(b *testing.B) {
	body := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), toolsListResult(50)...), '}')
	ids := map[string]string{IDKey([]byte("1")): MethodToolsList}
	allow := func(name string) bool { return len(name)%2 == 0 }
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		out, _, err := FilterResponseBodyRead(Era2025, body, ids, allow)
		if err != nil || len(out) >= len(body) {
			b.Fatal(err)
		}
	}
}

// BenchmarkFilterToolCallAnswer is the filter on a clean 64 KB tools/call
// answer, the common case: the check for case-variant JSON-RPC members
// included.
func BenchmarkFilterToolCallAnswer(b *testing.B) {
	text := make([]byte, 64<<10)
	for i := range text {
		text[i] = "Result Name id "[i%15]
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + string(text) + `"}],"isError":false}}`)
	ids := map[string]string{IDKey([]byte("1")): MethodToolsCall}
	allow := func(string) bool { return true }
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		out, _, err := FilterResponseBodyRead(Era2025, body, ids, allow)
		if err != nil || len(out) != len(body) {
			b.Fatal(err)
		}
	}
}
