package jsonscan

import (
	"errors"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// ErrNotObject: Object was given one JSON value that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// Object reads doc, one JSON object from a peer others may read too (an
// upstream's answer, a fetched document), and returns its members by exact
// name, each value as it is in doc. It fails with ErrSyntax when doc is not
// one JSON value (trailing data included), with jsonkey.ErrRepeated when
// any object in doc, at any depth, repeats a member name in some letter
// case (CheckMembers), with ErrNotObject when doc is another value, and
// with jsonkey.ErrVariant when a member name of doc folds to one of known
// without being it: encoding/json would read such a lone "Result" as
// "result", an exact reader would not, so neither reading is safe.
//
// The values are not decoded; a caller reads a nested object it uses with
// Object again, naming that object's known members.
func Object(doc []byte, known ...string) (map[string][]byte, error) {
	if err := CheckMembers(doc); err != nil {
		return nil, err
	}
	c := NewCursor(doc)
	if !c.Object() {
		return nil, ErrNotObject
	}
	out := make(map[string][]byte)
	names := make([]string, 0, 8)
	for c.NextMember() {
		name := string(Unquote(c.Key()))
		start, end := c.Skip()
		names = append(names, name)
		out[name] = doc[start:end]
	}
	if !c.Done() {
		return nil, ErrSyntax // CheckMembers accepted doc: not reached
	}
	if err := jsonkey.Check(names, known...); err != nil {
		return nil, err
	}
	return out, nil
}
