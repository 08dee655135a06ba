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
