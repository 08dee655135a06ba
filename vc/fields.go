package vc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// The credential is decoded into typed structs; the flexible JSON shapes
// (string or array, string or object, dates as text or numbers) have small
// types of their own, each recording whether the member was present.

// credential is a verifiable credential (VC 1.1 or 2.0) as far as delegation
// needs it: the "vc" claim, a vc+jwt payload or a JSON credential.
type credential struct {
	Context        json.RawMessage `json:"@context"`
	ID             string          `json:"id"`
	Type           stringList      `json:"type"`
	Issuer         issuerField     `json:"issuer"`
	IssuanceDate   dateTime        `json:"issuanceDate"`
	ExpirationDate dateTime        `json:"expirationDate"`
	ValidFrom      dateTime        `json:"validFrom"`
	ValidUntil     dateTime        `json:"validUntil"`
	Subject        subjectField    `json:"credentialSubject"`
	Status         json.RawMessage `json:"credentialStatus"`
}

// subject is credentialSubject: the KYA-OS form carries "delegation", the
// website form "scope" and "constraints", a status list credential "type",
// "statusPurpose" and "encodedList". The status list members stay raw: a
// delegation never reads them, so their shape must not break its parsing.
type subject struct {
	ID          string           `json:"id"`
	Scope       scopeList        `json:"scope"`
	Scopes      scopeList        `json:"scopes"`
	Constraints *constraints     `json:"constraints"`
	Delegation  *delegationClaim `json:"delegation"`

	Type          json.RawMessage `json:"type"`
	StatusPurpose json.RawMessage `json:"statusPurpose"`
	EncodedList   json.RawMessage `json:"encodedList"`
}

// delegationClaim is credentialSubject.delegation (KYA-OS).
type delegationClaim struct {
	ID          string       `json:"id"`
	SubjectDID  string       `json:"subjectDid"`
	UserDID     string       `json:"userDid"`
	Scopes      scopeList    `json:"scopes"`
	ParentID    string       `json:"parentId"`
	Constraints *constraints `json:"constraints"`
	// ParentURL [ours] says where the parent may be fetched from
	// (chainfetch.go).
	ParentURL string `json:"parentCredentialUrl"`
}

// constraints narrow a delegation; notBefore/notAfter are unix seconds.
// text is the object's JSON as presented, members the edge does not know
// included (Delegation.Constraints).
type constraints struct {
	Scopes    scopeList   `json:"scopes"`
	NotBefore numericDate `json:"notBefore"`
	NotAfter  numericDate `json:"notAfter"`
	Audience  stringList  `json:"audience"`
	text      string
}

// UnmarshalJSON decodes the known members and keeps the text, as jsonScan
// does on the VC-JWT path.
func (c *constraints) UnmarshalJSON(b []byte) error {
	type known constraints // without this method
	k := known(*c)
	if err := json.Unmarshal(b, &k); err != nil {
		return err
	}
	*c = constraints(k)
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		c.text = string(t)
	}
	return nil
}

// subjectField is credentialSubject: an object, or an array holding exactly
// one object.
type subjectField struct {
	subject
	set bool
}

func (f *subjectField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case isNull(b):
		return nil
	case len(b) > 0 && b[0] == '[':
		var list []subject
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		if len(list) != 1 {
			return errors.New("credentialSubject must hold exactly one subject")
		}
		f.subject = list[0]
	default:
		if err := json.Unmarshal(b, &f.subject); err != nil {
			return err
		}
	}
	f.set = true
	return nil
}

// stringList is a string or an array of strings.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if isNull(b) {
		*l = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*l = stringList{s}
		return nil
	}
	var a []string
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	*l = a
	return nil
}

func (l stringList) has(s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// scopeList is an array of scopes or one space-separated string; set
// records presence, because an empty list present narrows to nothing.
type scopeList struct {
	v   []string
	set bool
}

func (s *scopeList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if isNull(b) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		s.v = strings.Fields(str)
	} else if err := json.Unmarshal(b, &s.v); err != nil {
		return err
	}
	s.set = true
	return nil
}

// issuerField is "issuer": a string or an object with an id.
type issuerField string

func (f *issuerField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case isNull(b):
		*f = ""
		return nil
	case len(b) > 0 && b[0] == '{':
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*f = issuerField(o.ID)
		return nil
	default:
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = issuerField(s)
		return nil
	}
}

// Dates are clamped to 1970..9999: any JSON number then compares, and a
// date that is present is never the zero time.Time, which means absent.
// Clamping changes no outcome for a clock after 1970.
var (
	minDate = time.Unix(0, 0).UTC()
	maxDate = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

func clampDate(t time.Time) time.Time {
	switch {
	case t.Before(minDate):
		return minDate
	case t.After(maxDate):
		return maxDate
	}
	return t
}

// numericDate is a JWT NumericDate or a KYA-OS unix-seconds constraint: a
// JSON number of seconds, possibly fractional.
type numericDate struct {
	t   time.Time
	set bool
}

func (n *numericDate) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if isNull(b) {
		return nil
	}
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return errors.New("date must be a number of seconds")
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	switch {
	case math.IsNaN(f):
		return errors.New("date is not a number")
	case f <= float64(minDate.Unix()):
		n.t = minDate
	case f >= float64(maxDate.Unix()):
		n.t = maxDate
	default:
		sec, frac := math.Modf(f)
		n.t = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	}
	n.set = true
	return nil
}

// dateTime is an XML Schema dateTime string (issuanceDate, validFrom, …).
type dateTime struct {
	t   time.Time
	set bool
}

func (d *dateTime) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if isNull(b) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	t, err := parseDateTime(s)
	if err != nil {
		return err
	}
	d.t, d.set = clampDate(t), true
	return nil
}

// parseDateTime accepts RFC 3339 (what VC 1.1 and 2.0 require) and, as XML
// Schema allows, a dateTime without a zone, read as UTC.
func parseDateTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	t, err := time.Parse("2006-01-02T15:04:05.999999999", s)
	if err != nil {
		return time.Time{}, errors.New("invalid dateTime")
	}
	return t, nil
}

func isNull(b []byte) bool { return string(b) == "null" }
