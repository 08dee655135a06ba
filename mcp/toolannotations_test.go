package mcp

import (
	"errors"
	"maps"
	"testing"
)

func TestClassifyTool(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		readOnly, destructive *bool
		want                  ToolClass
	}{
		{nil, nil, ToolClassDestructive},
		{&yes, nil, ToolClassReadOnly},
		{&yes, &no, ToolClassReadOnly},
		{&yes, &yes, ToolClassDestructive},
		{&no, nil, ToolClassDestructive},
		{nil, &yes, ToolClassDestructive},
		{&no, &yes, ToolClassDestructive},
		{nil, &no, ToolClassOther},
		{&no, &no, ToolClassOther},
	}
	for _, tt := range tests {
		if got := ClassifyTool(tt.readOnly, tt.destructive); got != tt.want {
			t.Errorf("ClassifyTool(%v, %v) = %v, want %v", fmtBool(tt.readOnly), fmtBool(tt.destructive), got, tt.want)
		}
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "absent"
	}
	if *b {
		return "true"
	}
	return "false"
}

func TestEachListedTool(t *testing.T) {
	ids := map[string]string{IDKey([]byte("1")): MethodToolsList, IDKey([]byte("2")): MethodToolsCall}
	collect := func(body string, ids map[string]string) (map[string]ToolClass, error) {
		got := map[string]ToolClass{}
		err := EachListedTool([]byte(body), ids, func(n string, c ToolClass) { got[n] = c })
		return got, err
	}

	body := `[{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"not_a_list","annotations":{"readOnlyHint":true}}]}},
	{"jsonrpc":"2.0","id":1,"result":{"tools":[
		{"name":"ro","annotations":{"readOnlyHint":true}},
		{"name":"ro2","annotations":{"readOnlyHint":true,"destructiveHint":false,"openWorldHint":false}},
		{"name":"plain"},
		{"name":"nullann","annotations":null},
		{"name":"strhint","annotations":{"readOnlyHint":"true"}},
		{"name":"other","annotations":{"destructiveHint":false}},
		{"name":"dupann","annotations":{"readOnlyHint":true},"annotations":{}},
		{"name":"duphint","annotations":{"readOnlyHint":true,"readOnlyHint":false}},
		{"name":"a","name":"b","annotations":{"readOnlyHint":true}},
		{"Name":"c","annotations":{"readOnlyHint":true}},
		{"name":"esc\u0061ped","annotations":{"readOnlyHint":true}},
		42,
		{"annotations":{"readOnlyHint":true}}
	]}}]`
	got, err := collect(body, ids)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ToolClass{
		"ro": ToolClassReadOnly, "ro2": ToolClassReadOnly, "plain": ToolClassDestructive,
		"nullann": ToolClassDestructive, "strhint": ToolClassDestructive, "other": ToolClassOther,
		"dupann": ToolClassUnknown, "duphint": ToolClassUnknown, "escaped": ToolClassReadOnly,
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}

	if got, err := collect(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"x"}]}}`, nil); err != nil || len(got) != 0 {
		t.Errorf("without request ids: %v %v", got, err)
	}
	if got, err := collect(`{"jsonrpc":"2.0","id":1,"result":{}}`, ids); err != nil || len(got) != 0 {
		t.Errorf("no tools member: %v %v", got, err)
	}
	if _, err := collect(`{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"x"}}}`, ids); !errors.Is(err, ErrInvalidToolsList) {
		t.Errorf("tools object: %v", err)
	}
	if _, err := collect(`{"jsonrpc":"2.0","id":1,"result":[]}`, ids); !errors.Is(err, ErrNotObject) {
		t.Errorf("result array: %v", err)
	}
	if _, err := collect(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`, ids); err == nil {
		t.Error("truncated body accepted")
	}
}
