package challenge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Timestamp is the signedChallenge timestamp, kept in its JSON form (the
// signature covers it). Accepted forms: an RFC 3339 string
// ("2025-06-15T18:30:45Z", fractional seconds and offsets allowed), or a
// JSON integer of unix time: milliseconds when >= 1e11 (the KYA-OS
// runtimes), else seconds (the legacy KYA handshake).
type Timestamp json.RawMessage

// TimestampRFC3339 returns t as an RFC 3339 string timestamp (UTC, seconds).
func TimestampRFC3339(t time.Time) Timestamp {
	b, _ := json.Marshal(t.UTC().Format(time.RFC3339))
	return Timestamp(b)
}

// TimestampUnixMilli returns t as a number of unix milliseconds.
func TimestampUnixMilli(t time.Time) Timestamp {
	return Timestamp(strconv.FormatInt(t.UnixMilli(), 10))
}

// TimestampUnix returns t as a number of unix seconds.
func TimestampUnix(t time.Time) Timestamp {
	return Timestamp(strconv.FormatInt(t.Unix(), 10))
}

// MarshalJSON writes the timestamp as held (null when empty).
func (t Timestamp) MarshalJSON() ([]byte, error) {
	if len(t) == 0 {
		return []byte("null"), nil
	}
	return []byte(t), nil
}

// UnmarshalJSON keeps the JSON value as received.
func (t *Timestamp) UnmarshalJSON(data []byte) error {
	*t = append(Timestamp(nil), bytes.TrimSpace(data)...)
	return nil
}

// Time decodes the timestamp. Errors wrap ErrInvalidParams.
func (t Timestamp) Time() (time.Time, error) {
	b := []byte(t)
	if len(b) == 0 || len(b) > maxTimestampLen {
		return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
	}
	if b[0] == '"' {
		s, err := jsonString(b)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
		}
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: timestamp is not RFC 3339", ErrInvalidParams)
		}
		return tm, nil
	}
	if len(b) > maxNumericTSDigit {
		return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return time.Time{}, fmt.Errorf("%w: timestamp must be an RFC 3339 string or an unsigned integer", ErrInvalidParams)
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: bad timestamp", ErrInvalidParams)
	}
	if n >= 1e11 {
		return time.UnixMilli(n), nil
	}
	return time.Unix(n, 0), nil
}
