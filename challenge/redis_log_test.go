package challenge

import "testing"

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"dial tcp 127.0.0.1:6379: connect: connection refused": "dial tcp 127.0.0.1:6379: connect: connection refused",
		"bad redis://user:s3cret@host:6379/0 here":             "bad redis://REDACTED@host:6379/0 here",
		"rediss://:s3cret@a:1 and redis://u:p@b:2":             "rediss://REDACTED@a:1 and redis://REDACTED@b:2",
		"no userinfo redis://host:6379/0":                      "no userinfo redis://host:6379/0",
		"":                                                     "",
	} {
		if got := redactURLs(in); got != want {
			t.Errorf("redactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
