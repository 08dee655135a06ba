package caddymodule

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// durationInputs are JSON values a duration setting may hold, valid and
// not: edge.Duration must read each exactly as caddy.Duration does, so
// that every config Caddy adapts reaches the edge unchanged.
var durationInputs = []string{
	`0`, `-1`, `90000000000`, `"90s"`, `"5m"`, `"1h30m"`, `"1d"`, `"1.5d"`, `"1d12h"`, `"-2d"`,
	`"500ms"`, `"0"`, `"2562047h"`, `"1d2d"`, `""`, `"5"`, `"d"`, `"1.5.5d"`, `"5x"`, `1.5`, `1e9`,
	`true`, `"99999999999h"`, `99999999999999999999`, `"+3d"`, `".5d"`,
}

func TestDurationReadsAsCaddyDoes(t *testing.T) {
	for _, in := range durationInputs {
		checkSameDuration(t, []byte(in))
	}
}

func FuzzDurationReadsAsCaddyDoes(f *testing.F) {
	for _, in := range durationInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(checkSameDuration)
}

func checkSameDuration(t *testing.T, in []byte) {
	var c caddy.Duration
	var e edge.Duration
	cerr := json.Unmarshal(in, &c)
	eerr := json.Unmarshal(in, &e)
	// Caddy strips quotes without unescaping; a string with escapes or
	// bare quotes inside is read by neither the same way, and no adapter
	// writes one.
	if len(in) > 1 && in[0] == '"' && json.Valid(in) {
		var s string
		if json.Unmarshal(in, &s) == nil && `"`+s+`"` != string(in) {
			return
		}
	}
	if (cerr == nil) != (eerr == nil) || (cerr == nil && int64(c) != int64(e)) {
		t.Fatalf("%s: caddy.Duration %d (%v), edge.Duration %d (%v)", in, c, cerr, e, eerr)
	}
}
