package mcp

import (
	"errors"
	"testing"
)

// TestFilterRefusesSmuggledLists: a tools/list answer that a client folding
// case or keeping the last repeat reads as another list than the filter is
// refused (ErrAmbiguous, withheld by the edge), whatever request id it
// carries (review 6, F1). encoding/json reads each of these as a list
// holding "b".
func TestFilterRefusesSmuggledLists(t *testing.T) {
	allow := func(n string) bool { return n == "a" }
	results := []string{
		`{"Tools":[{"name":"b"}]}`,
		`{"TOOLS":[{"name":"b"}]}`,
		`{"tools":[{"name":"a"}],"TOOLS":[{"name":"b"}]}`,
		`{"tools":[],"Tools":[{"name":"b"}]}`,
		`{"toolſ":[{"name":"b"}]}`,
		`{"tools":[{"name":"a"}],"toolſ":[{"name":"b"}]}`,
		`{"tools":[{"name":"a"}],"tools":[{"name":"b"}]}`,
		`{"tools":[{"name":"a","Name":"b"}]}`,
		`{"tools":[{"name":"a","nAme":"b"}]}`,
		`{"tools":[{"name":"a","name":"b"}]}`,
		`{"tools":[{"name":"a","na\u006de":"b"}]}`,
		`{"tools":[{"name":"a"}],"t\u006fols":[{"name":"b"}]}`,
	}
	for _, ids := range []map[string]string{
		{IDKey([]byte("1")): MethodToolsList},
		nil, // a resumed stream
		{IDKey([]byte("1")): "ping"},
	} {
		for _, res := range results {
			for _, body := range []string{
				`{"jsonrpc":"2.0","id":1,"result":` + res + `}`,
				`[{"jsonrpc":"2.0","id":1,"result":` + res + `}]`,
			} {
				out, _, err := FilterResponseBodyRead(Era2025, []byte(body), ids, allow)
				if !errors.Is(err, ErrAmbiguous) || out != nil {
					t.Errorf("ids %v, %s: got %s, %v; want ErrAmbiguous", ids, body, out, err)
				}
			}
		}
	}
	// A JSON-RPC member in another case on a tools/list answer.
	ids := map[string]string{IDKey([]byte("1")): MethodToolsList}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"Result":{"tools":[{"name":"b"}]}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"Result":{"tools":[{"name":"b"}]}}`,
	} {
		if out, _, err := FilterResponseBodyRead(Era2025, []byte(body), ids, allow); !errors.Is(err, ErrAmbiguous) {
			t.Errorf("%s: got %s, %v; want ErrAmbiguous", body, out, err)
		}
	}
	// The clean answer is still filtered, and a clean answer with nothing
	// removed is returned as is.
	out, read, err := FilterResponseBodyRead(Era2025, []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`), ids, allow)
	if err != nil || string(out) != `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}` || read {
		t.Errorf("clean: got %s, %v, %v", out, read, err)
	}
}
