package mcp

import (
	"errors"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

func TestParamHeaders(t *testing.T) {
	for _, tt := range []struct {
		schema string
		want   []string
		bad    bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, nil, false},
		{`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`, []string{"Mcp-Param-Region"}, false},
		{`{"properties":{"o":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`, []string{"Mcp-Param-N"}, false},
		// Another type makes the tool invalid but keeps its valid bindings
		// number is bound (optional, by value).
		{`{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}`, []string{"Mcp-Param-A"}, true},
		{`{"properties":{"a":{"type":"number","x-mcp-header":"A"},"r":{"type":"string","x-mcp-header":"R"}}}`, []string{"Mcp-Param-A", "Mcp-Param-R"}, true},
		{`{"properties":{"a":{"type":["string"],"x-mcp-header":"A"},"r":{"type":"string","x-mcp-header":"R"}}}`, []string{"Mcp-Param-R"}, true},
		{`{"properties":{"a":{"x-mcp-header":"A"},"o":{"type":"object","x-mcp-header":"O"},"r":{"type":"boolean","x-mcp-header":"R"}}}`, []string{"Mcp-Param-R"}, true},
		{`{"properties":{"a":{"type":"number","x-mcp-header":"R"},"r":{"type":"string","x-mcp-header":"r"}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":""}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A\r\nX"}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":1}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}`, nil, true},
		{`{"properties":{"a":{"type":["string"],"x-mcp-header":"A"}}}`, nil, true},
		{`{"x-mcp-header":`, nil, true},
		// Read strictly, by exact name, as the official SDK's server reads it.
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A","x-mcp-header":"B"}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A","X-Mcp-Header":"B"}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","X-MCP-HEADER":"A"},"b":{"type":"string","x-mcp-header":"B"}}}`, nil, true},
		{`{"Properties":{"a":{"type":"string","x-mcp-header":"A"}}}`, nil, true},
		{`{"properties":{"a":{"Type":"string","x-mcp-header":"A"}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A"},"A":{"type":"string"}}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A"}},"properties":{}}`, nil, true},
		{`{"properties":{"a":{"type":"string","x-mcp-\u0068eader":"A"}},"x-mcp-header":0}`, []string{"Mcp-Param-A"}, false},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A"}},"description":"x-mcp-header","Title":"t"}`, []string{"Mcp-Param-A"}, false},
	} {
		got, err := ParamHeaders([]byte(tt.schema))
		if tt.bad {
			if !errors.Is(err, ErrInvalidParamHeader) {
				t.Errorf("%s: err %v, want ErrInvalidParamHeader", tt.schema, err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tt.schema, err)
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: %v, %v", tt.schema, got, err)
			continue
		}
		for i := range got {
			if got[i].Header != tt.want[i] {
				t.Errorf("%s: header %q, want %q", tt.schema, got[i].Header, tt.want[i])
			}
		}
	}
}

func TestCheckParamHeaders(t *testing.T) {
	bind, err := ParamHeaders([]byte(`{"properties":{"region":{"type":"string","x-mcp-header":"Region"},
		"o":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"},"b":{"type":"boolean","x-mcp-header":"B"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		h      []string
		params string
		ok     bool
	}{
		{"all match", []string{"Mcp-Param-Region", "eu", "Mcp-Param-N", "42", "Mcp-Param-B", "true"}, `{"name":"t","arguments":{"region":"eu","o":{"n":42,"b":true}}}`, true},
		{"absent args, no headers", nil, `{"name":"t"}`, true},
		{"null arg, no header", nil, `{"name":"t","arguments":{"region":null}}`, true},
		{"base64 value", []string{"Mcp-Param-Region", EncodeHeaderValue("süd")}, `{"name":"t","arguments":{"region":"s\u00fcd"}}`, true},
		{"integer as 42.0", []string{"Mcp-Param-N", "42"}, `{"name":"t","arguments":{"o":{"n":42.0}}}`, true},
		{"missing header", nil, `{"name":"t","arguments":{"region":"eu"}}`, false},
		{"empty string, empty header", []string{"Mcp-Param-Region", ""}, `{"name":"t","arguments":{"region":""}}`, true},
		{"empty string, no header", nil, `{"name":"t","arguments":{"region":""}}`, false},
		{"empty header for a value", []string{"Mcp-Param-Region", ""}, `{"name":"t","arguments":{"region":"eu"}}`, false},
		{"header for absent", []string{"Mcp-Param-Region", "eu"}, `{"name":"t","arguments":{}}`, false},
		{"header for null", []string{"Mcp-Param-Region", "eu"}, `{"name":"t","arguments":{"region":null}}`, false},
		{"mismatch", []string{"Mcp-Param-Region", "us"}, `{"name":"t","arguments":{"region":"eu"}}`, false},
		{"twice", []string{"Mcp-Param-Region", "eu", "Mcp-Param-Region", "eu"}, `{"name":"t","arguments":{"region":"eu"}}`, false},
		{"bool mismatch", []string{"Mcp-Param-B", "1"}, `{"name":"t","arguments":{"o":{"b":true}}}`, false},
		{"unsafe integer", []string{"Mcp-Param-N", "9007199254740993"}, `{"name":"t","arguments":{"o":{"n":9007199254740993}}}`, false},
		{"fraction", []string{"Mcp-Param-N", "1.5"}, `{"name":"t","arguments":{"o":{"n":1.5}}}`, false},
		{"object for string", []string{"Mcp-Param-Region", "{}"}, `{"name":"t","arguments":{"region":{}}}`, false},
		{"case variant argument", []string{"Mcp-Param-Region", "eu"}, `{"name":"t","arguments":{"region":"eu","Region":"us"}}`, false},
		{"bad base64", []string{"Mcp-Param-Region", "=?base64?***?="}, `{"name":"t","arguments":{"region":"eu"}}`, false},
		// Integer headers in their plain decimal spelling only:
		// a router reading the header as text must see the body's number.
		{"integer 0", []string{"Mcp-Param-N", "0"}, `{"name":"t","arguments":{"o":{"n":0}}}`, true},
		{"negative integer", []string{"Mcp-Param-N", "-7"}, `{"name":"t","arguments":{"o":{"n":-7}}}`, true},
		{"largest safe integer", []string{"Mcp-Param-N", "9007199254740991"}, `{"name":"t","arguments":{"o":{"n":9007199254740991}}}`, true},
		{"base64 of a plain integer", []string{"Mcp-Param-N", EncodeHeaderValue("42")}, `{"name":"t","arguments":{"o":{"n":42}}}`, true},
		{"header 42.0", []string{"Mcp-Param-N", "42.0"}, `{"name":"t","arguments":{"o":{"n":42}}}`, false},
		{"header +42", []string{"Mcp-Param-N", "+42"}, `{"name":"t","arguments":{"o":{"n":42}}}`, false},
		{"header 042", []string{"Mcp-Param-N", "042"}, `{"name":"t","arguments":{"o":{"n":42}}}`, false},
		{"header -0", []string{"Mcp-Param-N", "-0"}, `{"name":"t","arguments":{"o":{"n":0}}}`, false},
		{"header 4.2e1", []string{"Mcp-Param-N", "4.2e1"}, `{"name":"t","arguments":{"o":{"n":42}}}`, false},
		{"header hex float", []string{"Mcp-Param-N", "0x2Ap0"}, `{"name":"t","arguments":{"o":{"n":42}}}`, false},
		{"header 1_000", []string{"Mcp-Param-N", "1_000"}, `{"name":"t","arguments":{"o":{"n":1000}}}`, false},
		{"header -", []string{"Mcp-Param-N", "-"}, `{"name":"t","arguments":{"o":{"n":0}}}`, false},
		{"base64 of 42.0", []string{"Mcp-Param-N", EncodeHeaderValue("42.0")}, `{"name":"t","arguments":{"o":{"n":42}}}`, false},
		{"header beyond the safe range", []string{"Mcp-Param-N", "9007199254740992"}, `{"name":"t","arguments":{"o":{"n":9007199254740992}}}`, false},
		// Non-ASCII only in the base64 form.
		{"raw UTF-8 value", []string{"Mcp-Param-Region", "süd"}, `{"name":"t","arguments":{"region":"s\u00fcd"}}`, false},
		{"raw tab", []string{"Mcp-Param-Region", "e\tu"}, `{"name":"t","arguments":{"region":"e\tu"}}`, false},
		{"base64 of a tab", []string{"Mcp-Param-Region", EncodeHeaderValue("e\tu")}, `{"name":"t","arguments":{"region":"e\tu"}}`, true},
		{"inner space", []string{"Mcp-Param-Region", "e u"}, `{"name":"t","arguments":{"region":"e u"}}`, true},
		{"raw control byte", []string{"Mcp-Param-Region", "e\x01u"}, `{"name":"t","arguments":{"region":"e\u0001u"}}`, false},
		// The sentinel is case-sensitive (spec): another case is a literal.
		{"upper-case sentinel is literal", []string{"Mcp-Param-Region", "=?BASE64?ZXU=?="}, `{"name":"t","arguments":{"region":"eu"}}`, false},
		{"upper-case sentinel equal as literal", []string{"Mcp-Param-Region", "=?BASE64?ZXU=?="}, `{"name":"t","arguments":{"region":"=?BASE64?ZXU=?="}}`, true},
	} {
		err := CheckParamHeaders(hdr(tt.h...), []byte(tt.params), bind)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err %v", tt.name, err)
		}
		if err != nil && ErrorCode(err) != CodeHeaderMismatch && ErrorCode(err) != CodeInvalidParams {
			t.Errorf("%s: code %d", tt.name, ErrorCode(err))
		}
	}
}

func FuzzCheckParamHeaders(f *testing.F) {
	f.Add([]byte(`{"properties":{"r":{"type":"string","x-mcp-header":"R"}}}`), []byte(`{"arguments":{"r":"x"}}`), "x")
	f.Add([]byte(`{"properties":{"r":{"type":"integer","x-mcp-header":"R"}}}`), []byte(`{"arguments":{"r":1e3}}`), "1000")
	f.Add([]byte(`{"properties":{"r":{"type":"number","x-mcp-header":"R"}}}`), []byte(`{"arguments":{"r":3.5}}`), "3.5")
	f.Fuzz(func(t *testing.T, schema, params []byte, value string) {
		bind, _ := ParamHeaders(schema) // an invalid tool may keep valid bindings
		if !jsonscan.Valid(params) {
			return
		}
		h := hdr()
		for _, b := range bind {
			h.Set(b.Header, value)
		}
		_ = CheckParamHeaders(h, params, bind)
	})
}

// TestCheckNumberParamHeader: a "number" property (invalid per the spec,
// mirrored by the TypeScript and Ruby clients) is checked by value when its
// header is sent, and its header may be left out.
func TestCheckNumberParamHeader(t *testing.T) {
	bind, err := ParamHeaders([]byte(`{"properties":{"region":{"type":"string","x-mcp-header":"Region"},"score":{"type":"number","x-mcp-header":"Score"}}}`))
	if !errors.Is(err, ErrInvalidParamHeader) || len(bind) != 2 {
		t.Fatalf("ParamHeaders = %v, %v", bind, err)
	}
	for _, tt := range []struct {
		name   string
		h      []string
		params string
		ok     bool
	}{
		{"string still checked", []string{"Mcp-Param-Region", "us"}, `{"arguments":{"region":"eu","score":1}}`, false},
		{"no score header", []string{"Mcp-Param-Region", "eu"}, `{"arguments":{"region":"eu","score":3.5}}`, true},
		{"score as JavaScript writes it", []string{"Mcp-Param-Score", "3.5"}, `{"arguments":{"score":3.5}}`, true},
		{"integer-valued", []string{"Mcp-Param-Score", "42"}, `{"arguments":{"score":42.0}}`, true},
		{"exponent", []string{"Mcp-Param-Score", "1e+21"}, `{"arguments":{"score":1000000000000000000000}}`, true},
		{"other spelling, same value", []string{"Mcp-Param-Score", "4.2e1"}, `{"arguments":{"score":42}}`, true},
		{"small", []string{"Mcp-Param-Score", "1e-7"}, `{"arguments":{"score":0.0000001}}`, true},
		{"base64 form", []string{"Mcp-Param-Score", EncodeHeaderValue("3.5")}, `{"arguments":{"score":3.5}}`, true},
		{"different value", []string{"Mcp-Param-Score", "3.6"}, `{"arguments":{"score":3.5}}`, false},
		{"plus sign", []string{"Mcp-Param-Score", "+3.5"}, `{"arguments":{"score":3.5}}`, false},
		{"bare fraction", []string{"Mcp-Param-Score", ".5"}, `{"arguments":{"score":0.5}}`, false},
		{"trailing dot", []string{"Mcp-Param-Score", "5."}, `{"arguments":{"score":5}}`, false},
		{"hex float", []string{"Mcp-Param-Score", "0x1p1"}, `{"arguments":{"score":2}}`, false},
		{"NaN", []string{"Mcp-Param-Score", "NaN"}, `{"arguments":{"score":1}}`, false},
		{"Infinity", []string{"Mcp-Param-Score", "Infinity"}, `{"arguments":{"score":1e400}}`, false},
		{"overflow both", []string{"Mcp-Param-Score", "1e400"}, `{"arguments":{"score":1e400}}`, false},
		{"spaces", []string{"Mcp-Param-Score", " 3.5"}, `{"arguments":{"score":3.5}}`, false},
		{"sent for absent", []string{"Mcp-Param-Score", "1"}, `{"arguments":{}}`, false},
		{"twice", []string{"Mcp-Param-Score", "1", "Mcp-Param-Score", "1"}, `{"arguments":{"score":1}}`, false},
		{"string argument compared as string", []string{"Mcp-Param-Score", "high"}, `{"arguments":{"score":"high"}}`, true},
		{"string argument, other header", []string{"Mcp-Param-Score", "low"}, `{"arguments":{"score":"high"}}`, false},
	} {
		err := CheckParamHeaders(hdr(tt.h...), []byte(tt.params), bind)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err %v", tt.name, err)
		}
	}
}
