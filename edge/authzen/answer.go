package authzen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// ErrAnswer is wrapped by the errors of an answer the edge will not act
// on: the call is refused.
var ErrAnswer = errors.New("authzen: the PDP's answer is not an Access Evaluation response")

// maxReason bounds the reason given to a refused caller, in runes.
const maxReason = 256

// Decision is the PDP's decision.
type Decision struct {
	Allowed bool
	// Reason is the PDP's explanation for the user (context.reason_user),
	// one printable line; empty when it gave none.
	Reason string
}

// ParseAnswer reads an Access Evaluation response: a JSON object with a
// boolean "decision" and, optionally, an object "context". Other members
// are ignored (the API lets a PDP add them). Member names are matched
// exactly: a member given twice at any depth, in any letter case, or a
// lone one in another case ("Decision", "deciſion" with U+017F) is
// refused, since a lenient reader (encoding/json folds case) and an exact
// one would see different decisions.
func ParseAnswer(body []byte) (Decision, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return Decision{}, fmt.Errorf("%w: not a JSON object", ErrAnswer)
	}
	a, err := jsonscan.Object(body, "decision", "context")
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %v", ErrAnswer, err)
	}
	var d Decision
	switch string(a["decision"]) {
	case "true":
		d.Allowed = true
	case "false":
	case "":
		return Decision{}, fmt.Errorf("%w: no \"decision\" member", ErrAnswer)
	default:
		return Decision{}, fmt.Errorf("%w: \"decision\" is not a boolean", ErrAnswer)
	}
	raw := a["context"]
	if len(raw) == 0 || string(raw) == "null" {
		return d, nil
	}
	ctx, err := jsonscan.Object(raw, "reason_user")
	if err != nil {
		return Decision{}, fmt.Errorf("%w: \"context\" is not an object with exact member names: %v", ErrAnswer, err)
	}
	if !d.Allowed {
		d.Reason = reasonOf(ctx["reason_user"])
	}
	return d, nil
}

// reasonOf picks the user reason of a denial: reason_user is an object of
// texts keyed by language (and possibly status, as "en-403"); English is
// preferred, else the first key in order. A plain string is taken too.
// What is not text is ignored: the operator's message applies then.
func reasonOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clean(s)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ei, ej := isEnglish(keys[i]), isEnglish(keys[j])
		if ei != ej {
			return ei
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		if json.Unmarshal(m[k], &s) == nil {
			if r := clean(s); r != "" {
				return r
			}
		}
	}
	return ""
}

func isEnglish(k string) bool { return k == "en" || strings.HasPrefix(k, "en-") }

// clean makes s one printable line of at most maxReason runes.
func clean(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxReason {
			b.WriteString("…")
			break
		}
		switch {
		case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}
