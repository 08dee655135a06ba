package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestFilterResponseBodyCacheScope(t *testing.T) {
	ids := map[string]string{IDKey(json.RawMessage("1")): MethodToolsList}
	allowA := func(n string) bool { return n == "a" }
	for _, tt := range []struct {
		name string
		era  Era
		in   string
		want string
	}{
		{"2026 public becomes private, ttl kept", Era2026,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}],"ttlMs":60000,"cacheScope":"public","resultType":"complete"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":60000,"cacheScope":"private","resultType":"complete"}}`},
		{"2026 nothing removed still private", Era2026,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":5,"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":5,"cacheScope":"private"}}`},
		{"2026 absent scope added", Era2026,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":5}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"cacheScope":"private","tools":[{"name":"a"}],"ttlMs":5}}`},
		{"2026 already private unchanged", Era2026,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"cacheScope":"private"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"cacheScope":"private"}}`},
		{"2025 without scope stays byte for byte", Era2025,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}`},
		{"2025 with a public scope still private", Era2025,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":0,"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":0,"cacheScope":"private"}}`},
		{"non-list answers untouched", Era2026,
			`{"jsonrpc":"2.0","id":2,"result":{"resources":[],"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"resources":[],"cacheScope":"public"}}`},
		{"SSE-style list under unknown id", Era2026,
			`{"jsonrpc":"2.0","id":9,"result":{"tools":[{"name":"b"}],"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":9,"result":{"tools":[],"cacheScope":"private"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FilterResponseBodyFor(tt.era, []byte(tt.in), ids, allowA)
			if err != nil || string(got) != tt.want {
				t.Errorf("got %s, %v\nwant %s", got, err, tt.want)
			}
		})
	}
	// A case twin ("CacheScope") is refused with the whole list: a tool
	// list is read strictly.
	in := `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"cacheScope":"public","CacheScope":"public"}}`
	if got, err := FilterResponseBodyFor(Era2026, []byte(in), ids, allowA); !errors.Is(err, ErrAmbiguous) || got != nil {
		t.Errorf("case twin: got %s, %v; want ErrAmbiguous", got, err)
	}
	// An empty result object gets the member without a stray comma.
	got, _, err := markPrivate([]byte(`{ }`), 1, Era2026)
	if err != nil || string(got) != `{"cacheScope":"private" }` || !json.Valid(got) {
		t.Errorf("empty object: %s %v", got, err)
	}
}

func TestResultTypeIn2026(t *testing.T) {
	n := NeedsAuthorization{Tool: "t", Missing: []string{"s"}, ConsentURL: "https://c.example/x"}
	for _, tt := range []struct {
		name string
		b    []byte
		era  Era
	}{
		{"tool error 2025", ToolErrorResultFor(Era2025, json.RawMessage("1"), "no", nil), Era2025},
		{"tool error 2026", ToolErrorResultFor(Era2026, json.RawMessage("1"), "no", nil), Era2026},
		{"prompt 2025", NeedsAuthorizationResult(json.RawMessage("1"), n), Era2025},
		{"prompt 2026", NeedsAuthorizationResult(json.RawMessage("1"), func() NeedsAuthorization { m := n; m.Era = Era2026; return m }()), Era2026},
		{"plain prompt 2026", NeedsAuthorizationResult(json.RawMessage("1"), NeedsAuthorization{Tool: "t", Era: Era2026}), Era2026},
		{"rejected action 2026", resultResponse(json.RawMessage("1"), rejectedActionResult(Era2026, []ActionIssue{{Code: "x", Field: "y"}})), Era2026},
	} {
		var m struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(tt.b, &m); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		rt, has := m.Result["resultType"]
		if tt.era == Era2026 && rt != ResultTypeComplete {
			t.Errorf("%s: resultType %v in %s", tt.name, rt, tt.b)
		}
		if tt.era == Era2025 && (has || strings.Contains(string(tt.b), "resultType")) {
			t.Errorf("%s: 2025 answer has resultType: %s", tt.name, tt.b)
		}
	}
}
