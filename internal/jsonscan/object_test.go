package jsonscan

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

func TestObject(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      map[string]string // nil: refused with err
		err       error
	}{
		{"members", ` {"result":{"a":1},"id":"x","other":[1,{"b":2}]} `, map[string]string{"result": `{"a":1}`, "id": `"x"`, "other": `[1,{"b":2}]`}, nil},
		{"empty", `{}`, map[string]string{}, nil},
		{"escaped known name is the name", `{"res\u0075lt":1}`, map[string]string{"result": "1"}, nil},
		{"names repeated in another case", `{"x":1,"X":2}`, nil, jsonkey.ErrRepeated},
		{"repeated", `{"result":1,"result":2}`, nil, jsonkey.ErrRepeated},
		{"case-folded repeat", `{"result":1,"Result":2}`, nil, jsonkey.ErrRepeated},
		{"Unicode-folded repeat", `{"sk":1,"s\u212a":2}`, nil, jsonkey.ErrRepeated},
		{"repeat deep inside", `{"result":{"a":[{"n":1,"N":2}]}}`, nil, jsonkey.ErrRepeated},
		{"lone case variant of a known name", `{"Result":1}`, nil, jsonkey.ErrVariant},
		{"long-s variant of a known name", `{"re\u017fult":1}`, nil, jsonkey.ErrVariant},
		{"trailing data", `{"result":1} {}`, nil, ErrSyntax},
		{"trailing garbage", `{"result":1}x`, nil, ErrSyntax},
		{"truncated", `{"result":1`, nil, ErrSyntax},
		{"array", `[{"result":1}]`, nil, ErrNotObject},
		{"string", `"result"`, nil, ErrNotObject},
		{"null", `null`, nil, ErrNotObject},
		{"empty input", ``, nil, ErrSyntax},
	} {
		got, err := Object([]byte(c.doc), "result", "id", "sk")
		if c.want == nil {
			if err == nil || !errors.Is(err, c.err) {
				t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%s: %v, %v", c.name, got, err)
			continue
		}
		for k, v := range c.want {
			if string(got[k]) != v {
				t.Errorf("%s: %s = %s, want %s", c.name, k, got[k], v)
			}
		}
	}
}

// FuzzObject: what Object accepts, encoding/json reads the same way: every
// member it returns decodes to what encoding/json gives for that name.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{"result":{"a":1},"id":2}`, `{"Result":1}`, `{"a":1,"A":2}`, `{"res\u0075lt":1} `, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		got, err := Object([]byte(doc), "result", "id")
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(doc), &m) != nil || len(m) != len(got) {
			t.Fatalf("%q: accepted, but encoding/json reads %v", doc, m)
		}
		var viaStruct struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(doc), &viaStruct) != nil || string(viaStruct.Result) != string(got["result"]) {
			t.Fatalf("%q: result %s, encoding/json's struct reads %s", doc, got["result"], viaStruct.Result)
		}
	})
}
