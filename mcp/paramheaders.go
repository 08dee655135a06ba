package mcp

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// x-mcp-header (SEP-2243, MCP 2026-07-28): a tool's inputSchema may mark
// primitive properties, at any depth, with "x-mcp-header": "<Name>"; a
// client then mirrors the argument in the header Mcp-Param-<Name>, and a
// server that reads the body must refuse a header that is missing for a
// present argument, present for an absent (or null) one, or different.

// ParamHeader binds one argument of a tool to its Mcp-Param-* header.
type ParamHeader struct {
	// Path is the property names from inputSchema.properties down to the
	// argument.
	Path []string
	// Header is the full header name, "Mcp-Param-" + the annotation.
	Header string
	// Number: the property is of type "number", which the spec does not
	// permit (the tool is invalid), yet the TypeScript and Ruby SDK clients
	// mirror it (as JavaScript's String(value): "3.5", "1e+21"). Its header
	// is optional — a client that follows the spec drops the tool and sends
	// none — and, when sent, must equal the argument by value.
	Number bool
}

// ErrInvalidParamHeader: an inputSchema whose x-mcp-header annotations break
// the spec's rules; clients drop such a tool from the list.
var ErrInvalidParamHeader = errors.New("mcp: invalid x-mcp-header annotation")

// maxParamHeaders bounds the bindings of one tool: a schema is the
// upstream's, and each binding costs a lookup per call.
const maxParamHeaders = 32

// headerSchema is what ParamHeaders reads of a (sub)schema.
type headerSchema struct {
	Type       []byte
	XMCPHeader []byte
	Properties map[string]headerSchema
}

// schemaMembers is what readHeaderSchema reads, by exact name, as the
// official Go SDK does (case-sensitive decoding).
var schemaMembers = []string{"type", "x-mcp-header", "properties"}

// readHeaderSchema reads schema strictly: a member name repeated, or
// folding to one it reads without being it, at any level it reads is
// ErrInvalidParamHeader (encoding/json would match "Properties" or take the
// last of two "x-mcp-header", and bind a header the upstream does not).
// A schema that is not an object has nothing to read.
func readHeaderSchema(schema []byte, depth int) (headerSchema, error) {
	var s headerSchema
	if depth > MaxDepth {
		return s, ErrInvalidParamHeader
	}
	names, vals, err := objectMembers(schema)
	if err != nil || jsonkey.Check(names, schemaMembers...) != nil {
		return s, ErrInvalidParamHeader
	}
	for i, n := range names {
		switch n {
		case "type":
			s.Type = vals[i]
		case "x-mcp-header":
			s.XMCPHeader = vals[i]
		case "properties":
			pnames, pvals, err := objectMembers(vals[i])
			if err != nil || jsonkey.Check(pnames) != nil {
				return s, ErrInvalidParamHeader
			}
			s.Properties = make(map[string]headerSchema, len(pnames))
			for k, pn := range pnames {
				if s.Properties[pn], err = readHeaderSchema(pvals[k], depth+1); err != nil {
					return s, err
				}
			}
		}
	}
	return s, nil
}

// objectMembers returns the unescaped names and the values of the members
// of obj; none when obj is valid JSON but not an object.
func objectMembers(obj []byte) (names []string, vals [][]byte, err error) {
	ok := jsonscan.Walk(obj, func(key, val []byte) {
		names = append(names, string(jsonscan.Unquote(key)))
		vals = append(vals, val)
	})
	if !ok {
		return nil, nil, ErrInvalidParamHeader
	}
	return names, vals, nil
}

// ParamHeaders returns the x-mcp-header bindings of a tool's inputSchema
// (nil when it has none). Annotations must be non-empty HTTP tokens, unique
// without regard to case, on properties of type string, integer or boolean;
// otherwise ErrInvalidParamHeader. The schema is read strictly (see
// readHeaderSchema).
//
// An annotation on a property of another type makes the tool invalid
// (ErrInvalidParamHeader) without hiding the others: the valid bindings
// are returned with the error, so that one number or ["string"] property
// does not switch off the checks of the tool's other headers, which
// clients that keep the tool (the TypeScript SDK's) still send and
// routers may act on. A "number" property is bound as Number; any other
// type is not bound. Every other fault returns no bindings.
func ParamHeaders(inputSchema []byte) ([]ParamHeader, error) {
	if !strings.Contains(string(inputSchema), "x-mcp-header") {
		return nil, nil
	}
	s, err := readHeaderSchema(inputSchema, 1)
	if err != nil {
		return nil, err
	}
	var out []ParamHeader
	var typeFault error
	seen := map[string]bool{}
	var walk func(props map[string]headerSchema, prefix []string, depth int) error
	walk = func(props map[string]headerSchema, prefix []string, depth int) error {
		if depth > MaxDepth {
			return ErrInvalidParamHeader
		}
		for name, p := range props {
			path := append(append([]string(nil), prefix...), name)
			if p.XMCPHeader != nil {
				var h, typ string
				if json.Unmarshal(p.XMCPHeader, &h) != nil || !isToken(h) || seen[strings.ToLower(h)] {
					return ErrInvalidParamHeader
				}
				seen[strings.ToLower(h)] = true
				_ = json.Unmarshal(p.Type, &typ) // not a string: typ stays ""
				switch typ {
				case "string", "integer", "boolean":
					out = append(out, ParamHeader{Path: path, Header: HeaderParamPrefix + h})
				case "number":
					out = append(out, ParamHeader{Path: path, Header: HeaderParamPrefix + h, Number: true})
					typeFault = ErrInvalidParamHeader
				default:
					typeFault = ErrInvalidParamHeader
				}
				if len(out) > maxParamHeaders {
					return ErrInvalidParamHeader
				}
			}
			if err := walk(p.Properties, path, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(s.Properties, nil, 1); err != nil {
		return nil, err
	}
	// In one order whatever the map's: an unchanged schema gives equal
	// bindings.
	slices.SortFunc(out, func(a, b ParamHeader) int { return strings.Compare(a.Header, b.Header) })
	return out, typeFault
}

// isToken reports whether s is an HTTP field-name token (RFC 9110 tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// CheckParamHeaders checks the Mcp-Param-* headers of a tools/call against
// the arguments in its params, for the tool's bindings. Errors wrap
// ErrHeaderMismatch (FramingError naming the header).
func CheckParamHeaders(h http.Header, params []byte, bindings []ParamHeader) error {
	if len(bindings) == 0 {
		return nil
	}
	args, err := strictMember(params, "arguments")
	if err != nil {
		return err
	}
	for _, b := range bindings {
		vals := h.Values(b.Header)
		if len(vals) > 1 {
			return framingErr(b.Header, "given more than once")
		}
		arg, err := argumentAt(args, b.Path)
		if err != nil {
			return err
		}
		if arg == nil || string(arg) == "null" {
			if len(vals) == 1 {
				return framingErr(b.Header, "sent for an absent argument")
			}
			continue
		}
		if len(vals) == 0 && b.Number {
			continue // optional, see ParamHeader.Number
		}
		// An empty value mirrors only an empty string, which clients send
		// as is (EncodeHeaderValue("") is "").
		if len(vals) == 0 || (vals[0] == "" && string(arg) != `""`) {
			return framingErr(b.Header, "missing")
		}
		// A value outside visible ASCII must come in the base64 form: an
		// intermediary may read raw non-ASCII bytes in another charset.
		if !fieldASCII(vals[0]) {
			return framingErr(b.Header, "not ASCII (send the base64 form)")
		}
		v, ok := DecodeHeaderValue(vals[0])
		if !ok {
			return framingErr(b.Header, "invalid base64 form")
		}
		if b.Number && isJSONNumber(arg) {
			if !numberEquals(v, arg) {
				return framingErr(b.Header, "does not match the argument")
			}
		} else if !primitiveEquals(v, arg) {
			return framingErr(b.Header, "does not match the argument")
		}
	}
	return nil
}

// argumentAt walks path down from the arguments object; nil when a step is
// missing or not an object.
func argumentAt(args []byte, path []string) ([]byte, error) {
	cur := args
	for _, name := range path {
		v, err := strictMember(cur, name)
		if err != nil || v == nil {
			return nil, err
		}
		cur = v
	}
	return cur, nil
}

// primitiveEquals compares a decoded header with the JSON argument: strings
// exactly, booleans as "true"/"false", integers (within ±2^53-1) by value.
// Any other value cannot be mirrored, so never equals.
func primitiveEquals(header string, arg []byte) bool {
	switch arg[0] {
	case '"':
		s, ok := stringValue(arg, 0, len(arg))
		return ok && s == header
	case 't', 'f':
		return header == string(arg)
	}
	body, err := strconv.ParseFloat(string(arg), 64)
	if err != nil || body != math.Trunc(body) || math.Abs(body) > maxSafeInteger {
		return false
	}
	hv, ok := plainInteger(header)
	return ok && float64(hv) == body
}

// isJSONNumber reports whether b is one JSON number and nothing else
// (no sign other than a leading minus, no spaces around it).
func isJSONNumber(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || ('0' <= b[0] && b[0] <= '9')) &&
		'0' <= b[len(b)-1] && b[len(b)-1] <= '9' && json.Valid(b)
}

// numberEquals compares a number-typed header with a JSON number argument
// by value. The header must be a JSON number too ("3.5", "1e+21", "42" as
// JavaScript writes them; also "42.0" or "4.2e1"): "+3.5", ".5", "0x1p1",
// "NaN" or "Infinity" are refused. Both must be finite doubles.
func numberEquals(header string, arg []byte) bool {
	if !isJSONNumber([]byte(header)) {
		return false
	}
	hv, err1 := strconv.ParseFloat(header, 64)
	av, err2 := strconv.ParseFloat(string(arg), 64)
	return err1 == nil && err2 == nil && hv == av
}

// maxSafeInteger is the largest integer x-mcp-header may mirror (the
// spec's JavaScript safe range).
const maxSafeInteger = 1<<53 - 1

// plainInteger reads an integer header in its one plain decimal spelling,
// -?(0|[1-9][0-9]*) without "-0", as every SDK writes it. The spec asks
// servers to compare numbers by value; the edge does so for the body (42.0
// there is 42) but not for the header: an intermediary that routes on the
// header reads it as text, and "+42", "042", "42.0" or "0x2Ap0" are other
// texts than "42".
func plainInteger(s string) (int64, bool) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 16 || (digits[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxSafeInteger || n < -maxSafeInteger {
		return 0, false
	}
	return n, true
}

// fieldASCII reports whether a header value is visible ASCII and spaces
// only, what EncodeHeaderValue (as the SDKs) sends plain.
func fieldASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// EachListedParamHeaders calls fn with the name of every tool in the answers
// to tools/list requests in a JSON-RPC body (as EachListedTool reads them)
// and the x-mcp-header bindings of its inputSchema (nil when it has none;
// err is ErrInvalidParamHeader for annotations that break the rules, or an
// inputSchema given twice, and the bindings are then those ParamHeaders
// keeps). A tool without a single string "name" is
// skipped. A body that is not valid JSON-RPC, or a tools/list result that
// is not an object with a "tools" array, is an error; fn may have been
// called for the tools before it.
func EachListedParamHeaders(body []byte, requestIDs map[string]string, fn func(name string, bindings []ParamHeader, err error)) error {
	return eachListedToolObject(body, requestIDs, "inputSchema", func(name string, result []byte, sc [2]int, twice bool, _ int) error {
		if twice {
			fn(name, nil, ErrInvalidParamHeader)
			return nil
		}
		var bindings []ParamHeader
		var err error
		if sc[0] >= 0 {
			bindings, err = ParamHeaders(result[sc[0]:sc[1]])
		}
		fn(name, bindings, err)
		return nil
	})
}
