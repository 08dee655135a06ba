package duration

import (
	"encoding/json"
	"testing"
	"time"
)

func TestUnmarshalJSON(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`0`:              0,
		`90000000000`:    90 * time.Second,
		`"90s"`:          90 * time.Second,
		`"5m"`:           5 * time.Minute,
		`"1h30m"`:        90 * time.Minute,
		`"1d"`:           24 * time.Hour,
		`"1.5d"`:         36 * time.Hour,
		`"1d12h"`:        36 * time.Hour,
		`"-2s"`:          -2 * time.Second,
		`"500ms"`:        500 * time.Millisecond,
		`"\u0035m"`:      5 * time.Minute,
		`-1`:             -1,
		`"0"`:            0,
		`9000000000000`:  9000 * time.Second,
		`"2562047h"`:     2562047 * time.Hour,
		`"1d2d"`:         72 * time.Hour,
		`"3.000000001s"`: 3*time.Second + 1,
	} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if time.Duration(d) != want {
			t.Errorf("%s = %v, want %v", in, time.Duration(d), want)
		}
	}
}

func TestUnmarshalJSONMalformed(t *testing.T) {
	long := `"` + string(make([]byte, maxLen+1)) + `"`
	for _, in := range []string{
		`""`, `"5"`, `"m"`, `"5x"`, `"d"`, `"1.5.5d"`, `"--1d"`, `"1e3s"`,
		`1.5`, `1e9`, `true`, `null`, `{}`, `[]`, `"5m`, `"99999999999h"`,
		`99999999999999999999`, long,
	} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil && in != `null` {
			t.Errorf("%.40s: accepted as %v", in, time.Duration(d))
		}
	}
}

func TestMarshalJSONIsNanoseconds(t *testing.T) {
	b, err := json.Marshal(struct {
		D Duration `json:"d"`
	}{Duration(2 * time.Second)})
	if err != nil || string(b) != `{"d":2000000000}` {
		t.Fatalf("%s %v", b, err)
	}
}

// FuzzUnmarshalJSON: any input is read or refused without a panic, and a
// duration read back from what it writes is the same duration.
func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{`"1d12h"`, `90000000000`, `"-1.5d"`, `"1d2d"`, `""`, `"5"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var d Duration
		if json.Unmarshal(in, &d) != nil {
			return
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Fatalf("%q read as %d, written as %s, read back as %d (%v)", in, d, b, back, err)
		}
	})
}
