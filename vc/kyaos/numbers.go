package kyaos

import (
	"strconv"

	"github.com/gowebpki/jcs"
)

// The requestHash is JCS (RFC 8785), which reads every number as an
// IEEE-754 double: 9007199254740993 and 9007199254740992 hash alike, and
// so do 12345678901234567890 and 12345678901234567000. An upstream that
// reads exact integers or decimals (Python, json.Number, BigInt) acts on
// digits nobody signed, so an intermediary could swap them under a valid
// proof. A covered number must therefore mean exactly what its JCS form
// means: 1.0, 1e2 and 0.1 do (1, 100, 0.1), 2^53+1 and 20-digit integers
// do not, and the request is refused (request_hash_ambiguous_number).

// ambiguousNumber reports whether the covered part of r (method and params
// without _meta) holds a number whose value is not that of its JCS form.
// Only the members of an object params are read. The bytes around _meta's
// member are scanned as they are: they hold whole members, and the names
// in them are strings, which the scan passes over.
func (r request) ambiguousNumber() bool {
	if firstByte(r.params) != '{' {
		return false
	}
	if r.meta == nil {
		return hasAmbiguousNumber(r.params)
	}
	return hasAmbiguousNumber(r.params[:r.metaAt]) || hasAmbiguousNumber(r.params[r.metaEnd:])
}

// hasAmbiguousNumber scans the JSON value b (already read strictly, so a
// number can only start outside a string with '-' or a digit) for a
// number that does not round-trip.
func hasAmbiguousNumber(b []byte) bool {
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '-' || '0' <= c && c <= '9':
			j := i
			for j < len(b) && isNumberByte(b[j]) {
				j++
			}
			if !exactNumber(b[i:j]) {
				return true
			}
			i = j
		default:
			i++
		}
	}
	return false
}

func isNumberByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' || '0' <= c && c <= '9'
}

// exactNumber reports whether the JSON number num has the exact decimal
// value of its JCS form.
func exactNumber(num []byte) bool {
	if shortInteger(num) {
		return true // fifteen digits are exact in a double
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return false
	}
	canon, err := jcs.NumberToJSON(f)
	if err != nil {
		return false
	}
	a, aok := decimalOf(num)
	c, cok := decimalOf([]byte(canon))
	return aok && cok && a == c
}

// decimal is a number's exact value: sign × 0.digits × 10^exp, with no
// leading or trailing zero in digits (zero: no digits, exp 0).
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// decimalOf reads a JSON number (or a JCS one) exactly; ok false when its
// exponent does not fit.
func decimalOf(num []byte) (decimal, bool) {
	var d decimal
	if len(num) > 0 && num[0] == '-' {
		d.neg, num = true, num[1:]
	}
	var digits []byte
	pointAt := -1
	i := 0
	for ; i < len(num) && (num[i] == '.' || '0' <= num[i] && num[i] <= '9'); i++ {
		if num[i] == '.' {
			pointAt = len(digits)
			continue
		}
		digits = append(digits, num[i])
	}
	if pointAt < 0 {
		pointAt = len(digits)
	}
	var exp int64
	if i < len(num) { // e or E
		e, err := strconv.ParseInt(string(num[i+1:]), 10, 32)
		if err != nil {
			return d, false
		}
		exp = e
	}
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	digits = digits[lead:]
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if len(digits) == 0 {
		return decimal{neg: d.neg}, true
	}
	d.digits, d.exp = string(digits), exp+int64(pointAt-lead)
	return d, true
}
