// Package ratelimit counts MCP calls against rate limits and quotas keyed
// by the verified agent DID, user DID, tool, or a combination of them, with
// the generic cell rate algorithm (GCRA): one stored time per key, the
// theoretical arrival time of the next call, so that every decision is one
// read and one write of one key. Store is that key's home: Memory for one
// replica, Redis for every replica sharing one Redis (one round trip per
// decision, a Lua script, the time taken from the Redis server so that
// replicas with skewed clocks agree).
package ratelimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// Key parts a limit may be keyed by.
const (
	KeyAgent = "agent"
	KeyUser  = "user"
	KeyTool  = "tool"
)

// Bounds of a limit, so that the stored times stay far from overflow (in
// nanoseconds, and in microseconds inside Redis's Lua doubles).
const (
	// maxAhead is the furthest a key's stored time may run ahead of now:
	// burst × per / rate.
	maxAhead = 400 * 24 * time.Hour
	// minInterval is the shortest time between two calls at the steady
	// rate (per / rate): Redis counts in microseconds.
	minInterval = time.Microsecond
)

// Limit is one rate limit: Rate calls per Per for each distinct value of
// Key, at most Burst of them at once.
type Limit struct {
	// What the limit counts per: "agent" (the verified agent DID), "user"
	// (the user DID that delegated), "tool" (the tools/call name), or
	// several of them (one counter per combination).
	Key []string `json:"key"`
	// Calls allowed per Per, on average.
	Rate int `json:"rate"`
	// The period of Rate: 1s, 1m, 24h…
	Per time.Duration `json:"per"`
	// Most calls allowed at once, after a quiet spell. Default: Rate (the
	// whole period's allowance).
	Burst int `json:"burst,omitempty"`
}

// UnmarshalJSON reads a limit from a config: per as Caddy writes
// durations ("1m", "24h", "1d") or as nanoseconds.
func (l *Limit) UnmarshalJSON(b []byte) error {
	type plain Limit
	var aux struct {
		plain
		Per duration.Duration `json:"per"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*l = Limit(aux.plain)
	l.Per = time.Duration(aux.Per)
	return nil
}

// Validate checks l and says how to fix it.
func (l Limit) Validate() error {
	if len(l.Key) == 0 {
		return errors.New("rate limit: key is required: agent, user, tool, or a combination such as agent+tool")
	}
	seen := map[string]bool{}
	for _, k := range l.Key {
		switch k {
		case KeyAgent, KeyUser, KeyTool:
		default:
			return fmt.Errorf("rate limit: unknown key %q: use agent, user or tool, or a combination such as agent+tool", k)
		}
		if seen[k] {
			return fmt.Errorf("rate limit: key %q given twice", k)
		}
		seen[k] = true
	}
	if l.Rate < 1 || l.Per <= 0 {
		return fmt.Errorf("rate limit %s: rate must be at least 1 call per a positive period, such as 100/1m", l.Kind())
	}
	if l.Burst < 0 {
		return fmt.Errorf("rate limit %s: burst must not be negative", l.Kind())
	}
	q := l.quota()
	if q.Interval < minInterval {
		return fmt.Errorf("rate limit %s: %d per %s is more than one call per microsecond; lower the rate", l.Kind(), l.Rate, l.Per)
	}
	if time.Duration(q.Burst) > maxAhead/q.Interval {
		return fmt.Errorf("rate limit %s: burst %d at %d per %s spans more than 400 days; lower the burst or the period", l.Kind(), q.Burst, l.Rate, l.Per)
	}
	return nil
}

// Kind names the key parts in a fixed order, joined by "+" ("agent+tool"):
// the limit's metric label and the name an agent is told.
func (l Limit) Kind() string {
	var parts []string
	for _, k := range []string{KeyAgent, KeyUser, KeyTool} {
		if slices.Contains(l.Key, k) {
			parts = append(parts, k)
		}
	}
	return strings.Join(parts, "+")
}

// String is the limit as the Caddyfile writes it.
func (l Limit) String() string {
	return fmt.Sprintf("%s %d/%s burst %d", l.Kind(), l.Rate, l.Per, l.quota().Burst)
}

// quota is l as GCRA counts it.
func (l Limit) quota() Quota {
	b := l.Burst
	if b == 0 {
		b = l.Rate
	}
	return Quota{Interval: l.Per / time.Duration(l.Rate), Burst: b}
}

// id names the limit's counters: its key kinds and its numbers, so that two
// limits on the same key (100 per minute and 10000 per day per agent) count
// apart, and a changed limit starts afresh.
func (l Limit) id() string {
	q := l.quota()
	return l.Kind() + "/" + strconv.FormatInt(int64(q.Interval), 10) + "/" + strconv.Itoa(q.Burst)
}

// ParseRate reads "<calls>/<period>": 100/1m, 10/s, 10000/24h. A period
// without a number is one of it ("s" is 1s). parseDuration reads the
// period (Caddy's, which knows days too).
func ParseRate(s string, parseDuration func(string) (time.Duration, error)) (int, time.Duration, error) {
	calls, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: write it as <calls>/<period>, such as 100/1m", s)
	}
	n, err := strconv.Atoi(calls)
	if err != nil || n < 1 {
		return 0, 0, fmt.Errorf("rate %q: the number of calls must be a positive integer", s)
	}
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	d, err := parseDuration(per)
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("rate %q: the period must be a positive duration, such as 1s, 1m or 24h", s)
	}
	return n, d, nil
}

// ParseKey reads a key as the Caddyfile writes it: key parts joined by "+"
// ("agent", "agent+tool").
func ParseKey(s string) ([]string, error) {
	parts := strings.Split(s, "+")
	l := Limit{Key: parts, Rate: 1, Per: time.Second}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return parts, nil
}
