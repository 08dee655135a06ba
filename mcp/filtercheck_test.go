package mcp

import (
	"bytes"
	"reflect"
	"testing"
)

// filterCheckCases are upstream answers for the tool-list filter followed by
// the action check: tool lists kept, filtered or marked, tool results,
// answers that are not JSON-RPC, and ones the action check reads.
var filterCheckCases = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`,
	`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo"},{"name":"secret"}]}}`,
	`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo"}]}}`,
	`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}]`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"Result":{"content":[]}}`,
	`{"jsonrpc":"1.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]}} x`,
	`[]`,
	`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"handshakeAction":{"url":"https://evil.example.net/"}}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","url":"javascript:1"}}}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"mode":"url","url":"https://evil.example.net/"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"text":"\u0068andshakeAction"}}`,
}

// checkFilterThenCheck fails when the action check on a body the filter
// reported read answers otherwise than the full check, or when read is
// reported for a body ParseMessages refuses.
func checkFilterThenCheck(t *testing.T, body []byte) {
	t.Helper()
	ids := map[string]string{`1`: MethodToolsCall, `2`: MethodToolsList, `7`: ""}
	allow := func(name string) bool { return name != "secret" }
	out, read, err := FilterResponseBodyRead(Era2026, body, ids, allow)
	want, werr := FilterResponseBodyFor(Era2026, body, ids, allow)
	if !bytes.Equal(out, want) || (err == nil) != (werr == nil) {
		t.Fatalf("%s: FilterResponseBodyRead %s %v, FilterResponseBodyFor %s %v", body, out, err, want, werr)
	}
	if err != nil || !read {
		return
	}
	if !sameSlice(out, body) {
		t.Fatalf("%s: read reported for a rewritten body %s", body, out)
	}
	if _, _, perr := ParseMessages(out); perr != nil {
		t.Fatalf("%s: read reported for a body ParseMessages refuses: %v", body, perr)
	}
	for _, mode := range []ActionMode{ActionsEnforce, ActionsObserve} {
		opts := ActionOptions{ToolEndpointHost: "mcp.example.com", UserDID: "did:web:u", Era: Era2026}
		got, gotIssues, gotErr := CheckReadResponseBody(out, ids, opts, mode)
		full, fullIssues, fullErr := CheckResponseBody(out, ids, opts, mode)
		if !bytes.Equal(got, full) || !reflect.DeepEqual(gotIssues, fullIssues) || (gotErr == nil) != (fullErr == nil) {
			t.Fatalf("%s (%v): read check %s %v %v, full check %s %v %v", body, mode, got, gotIssues, gotErr, full, fullIssues, fullErr)
		}
	}
}

func TestFilterThenCheckReadsOnce(t *testing.T) {
	reads := 0
	for _, c := range filterCheckCases {
		if _, read, err := FilterResponseBodyRead(Era2026, []byte(c), map[string]string{`2`: MethodToolsList}, func(n string) bool { return n != "secret" }); err == nil && read {
			reads++
		}
		checkFilterThenCheck(t, []byte(c))
	}
	if reads == 0 {
		t.Fatal("no case is reported read: the test compares nothing")
	}
	// No allow function: the filter reads nothing, and says so.
	if _, read, _ := FilterResponseBodyRead(Era2026, []byte(filterCheckCases[0]), nil, nil); read {
		t.Fatal("read reported without a filter")
	}
}

func FuzzFilterThenCheck(f *testing.F) {
	for _, c := range filterCheckCases {
		f.Add([]byte(c))
	}
	f.Fuzz(checkFilterThenCheck)
}
