package toolpolicy

import (
	"mime"
	"strings"
	"testing"
)

// utf8CharsetRef is utf8Charset as it was: mime.ParseMediaType for every
// value.
func utf8CharsetRef(ct string) bool {
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

var contentTypeSeeds = []string{
	"application/json", "Application/JSON", " application/json ", "application/json; charset=utf-8",
	"application/json;charset=latin1", "application/json; charset=UTF-8; x=y", "application/json; x",
	"application", "application/", "/json", "application/json x", "application/json/x", "application/js(on",
	"text/plain", "\tapplication/json", "application/json\u00a0", "applİcation/json", "a/b;", "a/b; ;",
	"application/json;", "*/*", "application/vnd.api+json", "app lication/json", "application/\x00json",
}

// The fast path of utf8Charset refuses and accepts what mime does.
func TestUTF8Charset(t *testing.T) {
	for _, ct := range contentTypeSeeds {
		if got, want := utf8Charset(ct), utf8CharsetRef(ct); got != want {
			t.Errorf("utf8Charset(%q) = %v, mime says %v", ct, got, want)
		}
	}
}

func FuzzUTF8Charset(f *testing.F) {
	for _, ct := range contentTypeSeeds {
		f.Add(ct)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		if got, want := utf8Charset(ct), utf8CharsetRef(ct); got != want {
			t.Errorf("utf8Charset(%q) = %v, mime says %v", ct, got, want)
		}
	})
}
