package ratelimit

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		per  time.Duration
		fail string
	}{
		{in: "100/1m", n: 100, per: time.Minute},
		{in: "10/s", n: 10, per: time.Second},
		{in: "10000/24h", n: 10000, per: 24 * time.Hour},
		{in: "5/500ms", n: 5, per: 500 * time.Millisecond},
		{in: "100", fail: "<calls>/<period>"},
		{in: "/1m", fail: "positive integer"},
		{in: "0/1m", fail: "positive integer"},
		{in: "-1/1m", fail: "positive integer"},
		{in: "x/1m", fail: "positive integer"},
		{in: "10/", fail: "positive duration"},
		{in: "10/0s", fail: "positive duration"},
		{in: "10/-1s", fail: "positive duration"},
		{in: "10/fortnight", fail: "positive duration"},
		{in: "10/1m/2", fail: "positive duration"},
		{in: "99999999999999999999/1s", fail: "positive integer"},
	} {
		n, per, err := ParseRate(tc.in, time.ParseDuration)
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("ParseRate(%q): %v, want an error saying %q", tc.in, err, tc.fail)
			}
			continue
		}
		if err != nil || n != tc.n || per != tc.per {
			t.Errorf("ParseRate(%q) = %d, %s, %v; want %d, %s", tc.in, n, per, err, tc.n, tc.per)
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, ok := range []string{"agent", "user", "tool", "agent+tool", "tool+agent", "agent+user+tool"} {
		if _, err := ParseKey(ok); err != nil {
			t.Errorf("ParseKey(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "agents", "agent+", "+tool", "agent+agent", "agent,tool", "AGENT", "did"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

func TestLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		l    Limit
		fail string
	}{
		{Limit{Key: []string{"agent"}, Rate: 10, Per: time.Second}, ""},
		{Limit{Key: []string{"agent"}, Rate: 10000, Per: 30 * 24 * time.Hour, Burst: 10000}, ""},
		{Limit{Rate: 10, Per: time.Second}, "key is required"},
		{Limit{Key: []string{"agent"}, Per: time.Second}, "rate must be"},
		{Limit{Key: []string{"agent"}, Rate: 1}, "rate must be"},
		{Limit{Key: []string{"agent"}, Rate: 1, Per: time.Second, Burst: -1}, "burst"},
		{Limit{Key: []string{"agent"}, Rate: 2_000_000, Per: time.Second}, "microsecond"},
		{Limit{Key: []string{"agent"}, Rate: 1, Per: 24 * time.Hour, Burst: 500}, "400 days"},
	} {
		err := tc.l.Validate()
		if tc.fail == "" && err != nil || tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)) {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.fail)
		}
	}
	l := Limit{Key: []string{"tool", "agent"}, Rate: 10, Per: time.Minute}
	if l.Kind() != "agent+tool" || l.String() != "agent+tool 10/1m0s burst 10" {
		t.Errorf("Kind %q String %q", l.Kind(), l.String())
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100/1m", "10/s", "1/1ns", "0/0", "/", "9/9999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, per, err := ParseRate(s, time.ParseDuration)
		if err == nil && (n < 1 || per <= 0) {
			t.Fatalf("ParseRate(%q) = %d, %s without error", s, n, per)
		}
		if k, err := ParseKey(s); err == nil && len(k) == 0 {
			t.Fatalf("ParseKey(%q) gave no key parts", s)
		}
	})
}
