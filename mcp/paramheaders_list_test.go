package mcp

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// listed is what EachListedParamHeaders reported for one tool.
type listed struct {
	name    string
	headers []string
	invalid bool
}

func eachListed(t testing.TB, body string, ids map[string]string) ([]listed, error) {
	t.Helper()
	var got []listed
	err := EachListedParamHeaders([]byte(body), ids, func(name string, b []ParamHeader, err error) {
		l := listed{name: name, invalid: errors.Is(err, ErrInvalidParamHeader)}
		for _, p := range b {
			l.headers = append(l.headers, strings.Join(p.Path, ".")+"="+p.Header)
		}
		slices.Sort(l.headers)
		got = append(got, l)
	})
	return got, err
}

func TestEachListedParamHeaders(t *testing.T) {
	ids := map[string]string{IDKey([]byte("2")): MethodToolsList, IDKey([]byte("3")): MethodToolsCall}
	const sch = `{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"},"o":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`
	for _, tt := range []struct {
		name, body string
		want       []listed
		wantErr    bool
	}{
		{"bindings", `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":` + sch + `},{"name":"b","inputSchema":{"type":"object"}},{"name":"c"}]}}`,
			[]listed{{name: "a", headers: []string{"o.n=Mcp-Param-N", "r=Mcp-Param-Region"}}, {name: "b"}, {name: "c"}}, false},
		{"batch", `[{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":` + sch + `}]}}]`,
			[]listed{{name: "a", headers: []string{"o.n=Mcp-Param-N", "r=Mcp-Param-Region"}}}, false},
		{"answer to another method", `{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":` + sch + `}]}}`, nil, false},
		{"unknown id", `{"jsonrpc":"2.0","id":9,"result":{"tools":[{"name":"a","inputSchema":` + sch + `}]}}`, nil, false},
		{"error answer", `{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"x"}}`, nil, false},
		{"inputSchema twice", `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":` + sch + `,"inputSchema":{}}]}}`,
			[]listed{{name: "a", invalid: true}}, false},
		{"duplicate header names", `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"properties":{"x":{"type":"string","x-mcp-header":"R"},"y":{"type":"string","x-mcp-header":"r"}}}}]}}`,
			[]listed{{name: "a", invalid: true}}, false},
		{"object-typed annotation", `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"properties":{"x":{"type":"object","x-mcp-header":"R"}}}}]}}`,
			[]listed{{name: "a", invalid: true}}, false},
		{"name twice", `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","name":"b","inputSchema":` + sch + `}]}}`, nil, false},
		{"name not a string", `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":1,"inputSchema":` + sch + `}]}}`, nil, false},
		{"tool not an object", `{"jsonrpc":"2.0","id":2,"result":{"tools":[1,"a",null]}}`, nil, false},
		{"tools null", `{"jsonrpc":"2.0","id":2,"result":{"tools":null}}`, nil, false},
		{"tools not an array", `{"jsonrpc":"2.0","id":2,"result":{"tools":{}}}`, nil, true},
		{"tools twice", `{"jsonrpc":"2.0","id":2,"result":{"tools":[],"tools":[]}}`, nil, true},
		{"result not an object", `{"jsonrpc":"2.0","id":2,"result":[]}`, nil, true},
		{"not JSON", `{"jsonrpc":"2.0","id":2,"result":{"tools":[`, nil, true},
		{"not JSON-RPC", `[1,2]`, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := eachListed(t, tt.body, ids)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b listed) bool {
				return a.name == b.name && a.invalid == b.invalid && slices.Equal(a.headers, b.headers)
			}) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got, err := eachListed(t, `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":`+sch+`}]}}`, nil); err != nil || got != nil {
		t.Fatalf("nil ids: %+v %v", got, err)
	}
}

func FuzzEachListedParamHeaders(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"properties":{"r":{"type":"string","x-mcp-header":"R"}}}}]}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"properties":{"o":{"properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}}]}}]`))
	ids := map[string]string{IDKey([]byte("2")): MethodToolsList}
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = EachListedParamHeaders(body, ids, func(name string, b []ParamHeader, err error) {
			if err != nil && b != nil {
				t.Fatalf("bindings with an error for %q", name)
			}
			for _, p := range b {
				if !strings.HasPrefix(p.Header, HeaderParamPrefix) || len(p.Path) == 0 {
					t.Fatalf("bad binding %+v", p)
				}
			}
		})
	})
}
