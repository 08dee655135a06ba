package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestScanString(t *testing.T) {
	for in, want := range map[string]struct {
		end       int
		plain, ok bool
	}{
		`""`:                       {2, true, true},
		`"abc" tail`:               {5, true, true},
		`"0123456789abcdefgh"`:     {20, true, true},
		`"a\"b"`:                   {6, false, true},
		`"0123456789\\abcdef"`:     {20, false, true},
		`"é"`:                      {4, false, true},
		`"0123456789abcdeé"`:       {19, false, true},
		`"\u00e9"`:                 {8, false, true},
		`"~"`:                      {3, true, true},
		`"`:                        {0, false, false},
		`"abc`:                     {0, false, false},
		"\"a\x01b\"":               {0, false, false},
		`"\x"`:                     {0, false, false},
		`"\u12"`:                   {0, false, false},
		`"\u12g4"`:                 {0, false, false},
		`abc`:                      {0, false, false},
		``:                         {0, false, false},
		`"01234567\"0123456789ab"`: {24, false, true},
	} {
		end, plain, ok := ScanString([]byte(in), 0)
		if ok != want.ok || ok && (end != want.end || plain != want.plain) {
			t.Errorf("ScanString(%q) = %d, %t, %t; want %d, %t, %t", in, end, plain, ok, want.end, want.plain, want.ok)
		}
	}
}

func TestScanNumber(t *testing.T) {
	for in, want := range map[string]int{
		`0`: 1, `-0`: 2, `12,`: 2, `1.5e+3]`: 6, `-1E9`: 4, `0.0001`: 6, `10e-2 `: 5,
		`01`: 1, // a number ends where its grammar does; the caller refuses what follows
		`-`:  -1, `.5`: -1, `1.`: -1, `1e`: -1, `1e+`: -1, `+1`: -1, `--1`: -1, ``: -1, `x`: -1,
	} {
		end, ok := ScanNumber([]byte(in), 0)
		if ok != (want >= 0) || ok && end != want {
			t.Errorf("ScanNumber(%q) = %d, %t; want %d", in, end, ok, want)
		}
	}
}

// FuzzScanString: a string ScanString accepts is one encoding/json
// accepts, and a plain one is its own text.
func FuzzScanString(f *testing.F) {
	for _, s := range []string{`""`, `"abc"`, `"a\"b"`, `"é"`, `"\u00e9x"`, "\"a\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, plain, ok := ScanString(b, 0)
		var s string
		jerr := json.Unmarshal(b[:max(end, 1)], &s)
		if !ok {
			if len(b) > 0 && b[0] == '"' {
				// Whatever string encoding/json finds at the start, it
				// must not be a valid one ScanString missed.
				for e := 2; e <= len(b); e++ {
					var v string
					if json.Unmarshal(b[:e], &v) == nil {
						t.Fatalf("%q: refused, encoding/json reads %q", b, b[:e])
					}
				}
			}
			return
		}
		if jerr != nil {
			t.Fatalf("%q: accepted %q, encoding/json: %v", b, b[:end], jerr)
		}
		if plain && s != string(b[1:end-1]) {
			t.Fatalf("%q: plain, but its value is %q", b, s)
		}
	})
}
