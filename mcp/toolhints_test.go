package mcp

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

func TestEachListedToolHints(t *testing.T) {
	ids := map[string]string{IDKey([]byte("1")): MethodToolsList}
	long := strings.Repeat("t", MaxToolTitle+1)
	body := `{"jsonrpc":"2.0","id":1,"result":{"tools":[
		{"name":"all","annotations":{"title":"All","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false,"other":1}},
		{"name":"plain"},
		{"name":"null","annotations":null},
		{"name":"typed","annotations":{"title":5,"readOnlyHint":"true","openWorldHint":null,"idempotentHint":1}},
		{"name":"long","annotations":{"title":"` + long + `","idempotentHint":false}},
		{"name":"esc","annotations":{"t\u0069tle":"\u00e9","readOnlyHint":true}},
		{"name":"dup","annotations":{"title":"a","title":"b"}},
		{"name":"folded","annotations":{"readOnlyHint":true,"ReadOnlyHint":false}},
		{"name":"twice","annotations":{},"annotations":{"readOnlyHint":true}}
	]}}`
	got := map[string]string{}
	err := EachListedToolHints([]byte(body), ids, func(n string, c ToolClass, h map[string]any) {
		got[n] = fmt.Sprintf("%s %v", c, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"all":    "read_only map[destructiveHint:false idempotentHint:true openWorldHint:false readOnlyHint:true title:All]",
		"plain":  "destructive map[]",
		"null":   "destructive map[]",
		"typed":  "destructive map[]",
		"long":   "destructive map[idempotentHint:false]",
		"esc":    "read_only map[readOnlyHint:true title:é]",
		"dup":    "unknown map[]",
		"folded": "read_only map[readOnlyHint:true]", // exact names, as EachListedTool
		"twice":  "unknown map[]",
	}
	if !maps.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	for _, bad := range []string{`{"jsonrpc":"2.0","id":1,"result":{"tools":{}}}`, `{"jsonrpc":"2.0","id":1,"result":[]}`, `{`} {
		if err := EachListedToolHints([]byte(bad), ids, func(string, ToolClass, map[string]any) {}); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func FuzzEachListedToolHints(f *testing.F) {
	ids := map[string]string{IDKey([]byte("1")): MethodToolsList}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","annotations":{"title":"x","readOnlyHint":true}}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","annotations":{"title":"\ud800","title":1}}]}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		_ = EachListedToolHints([]byte(body), ids, func(n string, c ToolClass, h map[string]any) {
			if c == ToolClassUnknown && h != nil || c != ToolClassUnknown && h == nil {
				t.Fatalf("%s: class %s with hints %v", n, c, h)
			}
			for k, v := range h {
				switch v := v.(type) {
				case bool:
					if k == "title" {
						t.Fatalf("title %v", v)
					}
				case string:
					if k != "title" || len(v) > MaxToolTitle {
						t.Fatalf("%s %q", k, v)
					}
				default:
					t.Fatalf("%s of type %T", k, v)
				}
			}
		})
	})
}
