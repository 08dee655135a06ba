package caddymodule

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// The readers below are shared by every Caddyfile parser of this package,
// so that a kind of setting (a flag, a duration, a choice among words) is
// read, and refused, the same way wherever it appears.

// eachSetting calls parse with the name of each setting of the block that
// opens at d. A setting given a second time is refused ("<prefix><name>
// already specified") before parse sees it, unless it is repeatable: those
// check their own duplicates (a tool once per name, a score once per DID).
func eachSetting(d *caddyfile.Dispenser, prefix string, repeatable []string, parse func(name string) error) error {
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		if seen[name] && !slices.Contains(repeatable, name) {
			return d.Errf("%s%s already specified", prefix, name)
		}
		seen[name] = true
		if err := parse(name); err != nil {
			return err
		}
	}
	return nil
}

// flag sets *dst for a setting that takes no argument.
func flag(d *caddyfile.Dispenser, dst *bool) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	*dst = true
	return nil
}

// args reads exactly len(dst) arguments.
func args(d *caddyfile.Dispenser, dst ...*string) error {
	if !d.AllArgs(dst...) {
		return d.ArgErr()
	}
	return nil
}

// argList reads one or more arguments.
func argList(d *caddyfile.Dispenser, dst *[]string) error {
	if *dst = d.RemainingArgs(); len(*dst) == 0 {
		return d.ArgErr()
	}
	return nil
}

// positiveInt is v, the value of a setting, as a whole number above zero;
// want is the error's sentence, to which ", got <v>" is added.
func positiveInt(d *caddyfile.Dispenser, v, want string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, d.Errf("%s, got %q", want, v)
	}
	return n, nil
}

// parseDuration reads one duration argument (caddy.ParseDuration: Go
// durations plus "d" for days).
func parseDuration(d *caddyfile.Dispenser, dst *edge.Duration) error {
	name := d.Val()
	var v string
	if !d.AllArgs(&v) {
		return d.ArgErr()
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil {
		return d.Errf("%s: invalid duration %q: %v", name, v, err)
	}
	if dur <= 0 {
		return d.Errf("%s: duration must be positive, got %q", name, v)
	}
	*dst = edge.Duration(dur)
	return nil
}

// positiveDuration is v, the value of setting name, as a positive
// caddy.Duration; example shows a valid one in the error.
func positiveDuration(d *caddyfile.Dispenser, name, v, example string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s must be a positive duration (e.g. %s), got %q", name, example, v)
	}
	return caddy.Duration(dur), nil
}

// parseSize reads one size argument, in bytes or with a unit (64KiB, 1MB).
func parseSize(d *caddyfile.Dispenser, dst *int64) error {
	name := d.Val()
	var v string
	if !d.AllArgs(&v) {
		return d.ArgErr()
	}
	n, err := humanize.ParseBytes(v)
	if err != nil {
		return d.Errf("%s: invalid size %q: %v", name, v, err)
	}
	if n == 0 || n > math.MaxInt32 {
		return d.Errf("%s: size must be between 1 byte and 2GiB, got %q", name, v)
	}
	*dst = int64(n)
	return nil
}

// oneOf reads the one argument of setting name into dst, which must be one
// of allowed.
func oneOf(d *caddyfile.Dispenser, name string, dst *string, allowed ...string) error {
	var v string
	if !d.AllArgs(&v) {
		return d.ArgErr()
	}
	if err := oneOfValues(d, name, v, allowed...); err != nil {
		return err
	}
	*dst = v
	return nil
}

// oneOfValues refuses a value of setting name that is not one of allowed,
// naming them.
func oneOfValues(d *caddyfile.Dispenser, name, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	want := strings.Join(allowed[:len(allowed)-1], ", ") + " or " + allowed[len(allowed)-1]
	return d.Errf("%s must be %s, got %q", name, want, v)
}
