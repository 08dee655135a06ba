package rules

import (
	"encoding/json"
	"strings"
	"testing"
)

// nestedLists is arguments whose "items" holds n lists of n numbers.
func nestedLists(n int) json.RawMessage {
	inner := "[" + strings.TrimSuffix(strings.Repeat("12345,", n), ",") + "]"
	return json.RawMessage(`{"items": [` + strings.TrimSuffix(strings.Repeat(inner+",", n), ",") + `]}`)
}

// TestListSizeReadsNoNestedValue: a rule over a list's size does not
// convert the lists nested in it. Converting them all, before the rule's
// cost and time limits apply, cost tens of milliseconds per MiB of
// arguments whatever the rule read.
func TestListSizeReadsNoNestedValue(t *testing.T) {
	r, err := Compile("few", "arguments.items.size() <= 10", "")
	if err != nil {
		t.Fatal(err)
	}
	args := nestedLists(MaxArgumentsList) // a million numbers, 6 MB
	allocs := testing.AllocsPerRun(3, func() {
		ok, err := r.Eval(&Input{Arguments: args})
		if ok || err != nil {
			t.Fatalf("size of %d lists: %t, %v", MaxArgumentsList, ok, err)
		}
	})
	if allocs > 200 {
		t.Fatalf("%.0f allocations: the nested lists were converted", allocs)
	}
}

// TestListReadOnDemand: a list read lazily is the list decoded whole.
func TestListReadOnDemand(t *testing.T) {
	for expr, want := range map[string]bool{
		"arguments.items[1][2] == 12345":                                    true,
		"arguments.items[2] == [12345, 12345, 12345]":                       true,
		"[12345, 12345, 12345] in arguments.items":                          true,
		"arguments.items.all(l, l.size() == 3 && l.all(x, x == 12345))":     true,
		"arguments.items + [[1]] == arguments.items":                        false,
		"size(arguments.items[0]) == 3 && arguments.items[0][2.0] == 12345": true,
		"arguments.l == [1, 'a', {'k': [true]}]":                            true,
		"arguments.e.size() == 0 && arguments.e == []":                      true,
	} {
		r, err := Compile("x", expr, "")
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		args := json.RawMessage(`{"items": [[12345,12345,12345],[12345,12345,12345],[12345,12345,12345]], "l": [1, "a", {"k": [true]}], "e": []}`)
		if got, err := r.Eval(&Input{Arguments: args}); got != want || err != nil {
			t.Errorf("%s = %t, %v; want %t", expr, got, err, want)
		}
	}
}
