package kyaos

import (
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

var numberCases = []struct {
	num   string
	exact bool
}{
	{"0", true}, {"1", true}, {"-1", true}, {"0.0", true}, {"1.0", true}, {"1e2", true},
	{"1E2", true}, {"1e+2", true}, {"100e-2", true}, {"0.1", true}, {"-0.5", true},
	{"5e-324", true}, {"1e21", true}, {"1.7976931348623157e308", true},
	{"999999999999999", true}, {"9007199254740992", true}, {"12345678901234567000", true},
	{"-0", false}, {"-0.0", false},
	{"9007199254740993", false}, {"12345678901234567890", false}, {"12345678901234567891", false},
	{"0.10000000000000000001", false}, {"1.00000000000000000001", false},
	{"1e400", false}, {"-1e400", false}, {"1e-400", false}, {"0e99999999999", false},
	// Malformed (the body is read strictly first; still fail closed).
	{"", false}, {"-", false}, {"1e", false}, {"1e+", false}, {"--1", false}, {"1.2.3", false}, {"0x1", false},
}

func TestExactNumber(t *testing.T) {
	for _, c := range numberCases {
		if got := exactNumber([]byte(c.num)); got != c.exact {
			t.Errorf("exactNumber(%q) = %v, want %v", c.num, got, c.exact)
		}
	}
}

func TestHasAmbiguousNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{`{"a":1,"b":[1.5,-2e3,{"c":9007199254740992}]}`, false},
		{`{"a":[1,{"b":9007199254740993}]}`, true},
		{`"9007199254740993"`, false},
		{`{"a":"x\"9007199254740993"}`, false},
		{`{"9007199254740993":true,"b":null}`, false},
		{`[true,false,null,-0]`, true},
		{`12345678901234567891`, true},
	} {
		if got := hasAmbiguousNumber([]byte(c.in)); got != c.want {
			t.Errorf("hasAmbiguousNumber(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

// FuzzExactNumber: a number called exact has the exact value (big.Rat) of
// its JCS form, so two exact numbers that hash alike are equal.
func FuzzExactNumber(f *testing.F) {
	for _, c := range numberCases {
		f.Add(c.num)
	}
	f.Fuzz(func(t *testing.T, num string) {
		hasAmbiguousNumber([]byte(num)) // any bytes: no panic
		if len(num) > 64 || !exactNumber([]byte(num)) {
			return
		}
		if i := strings.IndexAny(num, "eE"); i >= 0 {
			if e, err := strconv.Atoi(num[i+1:]); err != nil || e > 400 || e < -400 {
				return // big.Rat would build 10^e
			}
		}
		f64, err := strconv.ParseFloat(num, 64)
		if err != nil {
			t.Fatalf("%q exact but not a float: %v", num, err)
		}
		canon, err := jcs.NumberToJSON(f64)
		if err != nil {
			t.Fatal(err)
		}
		a, ok1 := new(big.Rat).SetString(num)
		c, ok2 := new(big.Rat).SetString(canon)
		if !ok1 || !ok2 || a.Cmp(c) != 0 || (strings.HasPrefix(num, "-") != strings.HasPrefix(canon, "-")) {
			t.Fatalf("%q called exact, JCS form %q", num, canon)
		}
	})
}
