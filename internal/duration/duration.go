// Package duration is the type of the edge's duration settings: a
// time.Duration that reads the JSON Caddy's adapter writes, so that the
// Caddy module can hand its JSON config to the edge as it is, without a
// mirror of every settings type.
//
// It reads what caddy.Duration reads: a number of nanoseconds, or a string
// that time.ParseDuration accepts, with "d" (24h) as a unit beside the
// others ("1d", "1.5d", "1d12h"). It writes a number of nanoseconds, as
// caddy.Duration does, so that adapted configs stay as they are.
package duration

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// Duration is a time.Duration in a configuration.
type Duration time.Duration

// maxLen bounds the string Parse reads, as Caddy's parser does.
const maxLen = 1024

// UnmarshalJSON reads a number of nanoseconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := Parse(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var n time.Duration
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New(`a duration is a number of nanoseconds or a string such as "90s", "5m", "1h" or "1d"`)
	}
	*d = Duration(n)
	return nil
}

// Parse reads a duration string: time.ParseDuration's units and "d" for 24
// hours.
func Parse(s string) (time.Duration, error) {
	if len(s) > maxLen {
		return 0, errors.New("parsing duration: input string too long")
	}
	var inNumber bool
	var numStart int
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch == 'd' {
			days, err := strconv.ParseFloat(s[numStart:i], 64)
			if err != nil {
				return 0, err
			}
			s = s[:numStart] + strconv.FormatFloat(days*24, 'f', -1, 64) + "h" + s[i+1:]
			i--
			continue
		}
		if !inNumber {
			numStart = i
		}
		inNumber = (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '+'
	}
	return time.ParseDuration(s)
}
