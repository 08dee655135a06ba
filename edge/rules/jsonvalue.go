package rules

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// The arguments as CEL values read from their JSON text where a rule
// looks: `arguments.amount` finds the member "amount" and converts its
// value, and nothing else of the arguments is decoded. Decoding them
// whole (encoding/json into a generic map, then every number converted)
// was most of the cost of a rule over the arguments, on every call,
// whatever the rule read.
//
// The text is checked whole first (readArguments): one JSON object, no
// member name repeated in any letter case, at most MaxArgumentsDepth
// deep. So a value read here is always well-formed, and a recursion over
// it (equality, a conversion) is bounded by that depth. A list is bounded
// where it is read (MaxArgumentsList), and a number out of range is an
// error where it is read: both errors wrap ErrArguments.

// readArguments checks raw, a tools/call's arguments, and returns them as
// a CEL map. Absent or null arguments are an empty map.
func readArguments(raw []byte) (ref.Val, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return &jsonObject{raw: []byte("{}")}, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("%w: they are not a JSON object", ErrArguments)
	}
	switch err := jsonscan.CheckMembersLimit(raw, MaxArgumentsDepth); err {
	case nil:
		return &jsonObject{raw: raw}, nil
	case jsonscan.ErrTooDeep:
		return nil, fmt.Errorf("%w: nested more than %d deep", ErrArguments, MaxArgumentsDepth)
	default:
		return nil, fmt.Errorf("%w: %v", ErrArguments, err)
	}
}

// ReadObject reads a JSON object of the caller's credential (its
// constraints) as the arguments are read: checked whole once, then read
// where a rule looks. Absent or null is an empty map. The value marshals
// to JSON as its text, for those who send it on (the PDP).
func ReadObject(raw []byte) (ref.Val, error) { return readArguments(raw) }

// jsonValue converts one checked JSON value: scalars to CEL values,
// an object to a jsonObject and a list to a jsonArray, both read on
// demand.
func jsonValue(raw []byte) ref.Val {
	switch raw[0] {
	case '{':
		return &jsonObject{raw: raw}
	case '[':
		return readList(raw)
	case '"':
		return types.String(jsonscan.Unquote(raw))
	case 't':
		return types.True
	case 'f':
		return types.False
	case 'n':
		return types.NullValue
	}
	return jsonNumber(raw)
}

// jsonNumber is an int when the number is an integer that fits 64 bits,
// else a double; a number a double cannot hold is an error.
func jsonNumber(raw []byte) ref.Val {
	s := string(raw)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return types.Int(i)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return types.WrapErr(fmt.Errorf("%w: a number is out of range", ErrArguments))
	}
	return types.Double(f)
}

// jsonObject is a JSON object as a CEL map from strings. A member is
// found by scanning the text; what needs every member (iteration,
// equality, conversion) works on the object read whole, once.
type jsonObject struct {
	raw   []byte
	whole traits.Mapper
}

var _ traits.Mapper = (*jsonObject)(nil)

// Find implements traits.Mapper: the value of the member named key, a
// string. Member names were checked not to repeat, in any case, so at
// most one matches exactly; one that matches only in another case is an
// error (folded.go).
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	c := jsonscan.NewCursor(o.raw)
	c.Object()
	folded := false
	for c.NextMember() {
		match := keyIs(c.Key(), string(k))
		folded = folded || (!match && keyFolds(c.Key(), string(k)))
		start, end := c.Skip()
		if match {
			v := jsonValue(o.raw[start:end])
			return v, !types.IsError(v)
		}
	}
	if folded {
		return foldedMember(string(k)), false
	}
	return nil, false
}

// keyIs reports whether the quoted key q is name once unescaped.
func keyIs(q []byte, name string) bool {
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner) == name
	}
	return string(jsonscan.Unquote(q)) == name
}

// read returns the object read whole: its members as CEL values.
func (o *jsonObject) read() traits.Mapper {
	if o.whole == nil {
		m := make(map[ref.Val]ref.Val)
		c := jsonscan.NewCursor(o.raw)
		c.Object()
		for c.NextMember() {
			k := types.String(jsonscan.Unquote(c.Key()))
			start, end := c.Skip()
			m[k] = jsonValue(o.raw[start:end])
		}
		o.whole = types.NewRefValMap(types.DefaultTypeAdapter, m)
	}
	return o.whole
}

// Get implements traits.Indexer.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

// Contains implements traits.Container.
func (o *jsonObject) Contains(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if v != nil && types.IsError(v) {
		return v
	}
	return types.Bool(found)
}

// Size implements traits.Sizer, counting the members without reading them.
func (o *jsonObject) Size() ref.Val {
	if o.whole != nil {
		return o.whole.Size()
	}
	n := 0
	c := jsonscan.NewCursor(o.raw)
	c.Object()
	for c.NextMember() {
		c.Skip()
		n++
	}
	return types.Int(n)
}

// IsZeroValue reports whether the object has no member.
func (o *jsonObject) IsZeroValue() bool { return o.Size() == types.Int(0) }

func (o *jsonObject) Iterator() traits.Iterator { return o.read().Iterator() }

func (o *jsonObject) ConvertToNative(t reflect.Type) (any, error) { return o.read().ConvertToNative(t) }

func (o *jsonObject) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return o
	case types.TypeType:
		return types.MapType
	}
	return o.read().ConvertToType(t)
}

func (o *jsonObject) Equal(other ref.Val) ref.Val { return o.read().Equal(other) }

func (o *jsonObject) Type() ref.Type { return types.MapType }

func (o *jsonObject) Value() any { return o.read().Value() }

func (o *jsonObject) String() string { return fmt.Sprint(o.read()) }

// MarshalJSON writes the object's text, which was checked to be one JSON
// object.
func (o *jsonObject) MarshalJSON() ([]byte, error) { return o.raw, nil }
