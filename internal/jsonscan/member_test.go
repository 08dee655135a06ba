package jsonscan

import "testing"

func TestMember(t *testing.T) {
	cases := []struct{ obj, name, want string }{
		{`{"a":1,"b":{"c":2}}`, "b", `{"c":2}`},
		{`{"\u0061":true}`, "a", `true`},
		{`{"a":1}`, "b", ``},
		{`[{"a":1}]`, "a", ``},
		{`{"a":1`, "a", ``},
		{`"a"`, "a", ``},
	}
	for _, c := range cases {
		if got := string(Member([]byte(c.obj), c.name)); got != c.want {
			t.Errorf("Member(%s, %q) = %q, want %q", c.obj, c.name, got, c.want)
		}
	}
}

func TestSetMember(t *testing.T) {
	cases := []struct{ obj, name, val, want string }{
		{`{"a":1, "b" : 2}`, "b", `[3]`, `{"a":1,"b":[3]}`},
		{`{"a":1}`, "c", `"x"`, `{"a":1,"c":"x"}`},
		{`{}`, "c", `null`, `{"c":null}`},
		{`{"\u0062":2,"a":1.50}`, "b", `0`, `{"\u0062":0,"a":1.50}`},
	}
	for _, c := range cases {
		if got := string(SetMember([]byte(c.obj), c.name, []byte(c.val))); got != c.want {
			t.Errorf("SetMember(%s, %q) = %s, want %s", c.obj, c.name, got, c.want)
		}
	}
}
