package rules

import (
	"fmt"
	"reflect"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// jsonArray is a JSON list as a CEL list. Reading it only finds where
// its values lie; a value is converted when a rule reaches it, so that
// `arguments.items.size()` costs a scan of the list, not a conversion of
// every list nested in it, which is done outside the rule's cost and
// time limits. What needs every value (iteration, equality, a
// conversion) converts this list's values, once; lists nested in them
// stay unread until reached.
type jsonArray struct {
	raw   []byte
	spans [][2]int // each value's start and end in raw
	whole traits.Lister
}

var _ traits.Lister = (*jsonArray)(nil)

// readList finds the values of a checked JSON list, at most
// MaxArgumentsList of them: a longer one is an error before any rule
// walks it.
func readList(raw []byte) ref.Val {
	a := &jsonArray{raw: raw}
	c := jsonscan.NewCursor(raw)
	c.Array()
	for c.NextElement() {
		if len(a.spans) == MaxArgumentsList {
			return types.WrapErr(fmt.Errorf("%w: a list holds more than %d values", ErrArguments, MaxArgumentsList))
		}
		start, end := c.Skip()
		a.spans = append(a.spans, [2]int{start, end})
	}
	return a
}

func (a *jsonArray) elem(i int) ref.Val { return jsonValue(a.raw[a.spans[i][0]:a.spans[i][1]]) }

// read returns the list with its values converted.
func (a *jsonArray) read() traits.Lister {
	if a.whole == nil {
		elems := make([]ref.Val, len(a.spans))
		for i := range a.spans {
			elems[i] = a.elem(i)
		}
		a.whole = types.NewRefValList(types.DefaultTypeAdapter, elems)
	}
	return a.whole
}

// Get implements traits.Indexer, converting only the value asked for.
func (a *jsonArray) Get(index ref.Val) ref.Val {
	if i, ok := index.(types.Int); ok && i >= 0 && int(i) < len(a.spans) && a.whole == nil {
		return a.elem(int(i))
	}
	return a.read().Get(index)
}

// Size implements traits.Sizer without converting a value.
func (a *jsonArray) Size() ref.Val { return types.Int(len(a.spans)) }

// IsZeroValue reports whether the list is empty.
func (a *jsonArray) IsZeroValue() bool { return len(a.spans) == 0 }

func (a *jsonArray) Add(other ref.Val) ref.Val      { return a.read().Add(other) }
func (a *jsonArray) Contains(value ref.Val) ref.Val { return a.read().Contains(value) }
func (a *jsonArray) Iterator() traits.Iterator      { return a.read().Iterator() }
func (a *jsonArray) Equal(other ref.Val) ref.Val    { return a.read().Equal(other) }
func (a *jsonArray) Type() ref.Type                 { return types.ListType }
func (a *jsonArray) Value() any                     { return a.read().Value() }
func (a *jsonArray) String() string                 { return fmt.Sprint(a.read()) }

func (a *jsonArray) ConvertToNative(t reflect.Type) (any, error) { return a.read().ConvertToNative(t) }

func (a *jsonArray) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.ListType:
		return a
	case types.TypeType:
		return types.ListType
	}
	return a.read().ConvertToType(t)
}

// MarshalJSON writes the list's text, which was checked to be JSON.
func (a *jsonArray) MarshalJSON() ([]byte, error) { return a.raw, nil }
