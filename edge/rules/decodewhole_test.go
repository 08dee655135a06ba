package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// decodeWhole reads tools/call arguments whole, as a rule sees them: the
// oracle FuzzArguments holds the on-demand reader to. A JSON object (null
// or absent: empty) whose numbers are int64 when they are integers that
// fit, else float64. The text is read strictly: a member
// name given twice at any depth, in any letter case, is refused, since the
// upstream might read the other value than the rule did.
func decodeWhole(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("%w: they are not a JSON object", ErrArguments)
	}
	if err := jsonscan.CheckMembers(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArguments, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrArguments, err)
	}
	v, err := convert(v, 0)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// convert replaces json.Numbers by int64 or float64, and bounds depth.
func convert(v any, depth int) (any, error) {
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("%w: a number is out of range", ErrArguments)
		}
		return f, nil
	case map[string]any:
		if depth >= MaxArgumentsDepth {
			return nil, fmt.Errorf("%w: nested more than %d deep", ErrArguments, MaxArgumentsDepth)
		}
		for k, e := range t {
			c, err := convert(e, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
	case []any:
		if depth >= MaxArgumentsDepth {
			return nil, fmt.Errorf("%w: nested more than %d deep", ErrArguments, MaxArgumentsDepth)
		}
		if len(t) > MaxArgumentsList {
			return nil, fmt.Errorf("%w: a list holds more than %d values", ErrArguments, MaxArgumentsList)
		}
		for i, e := range t {
			c, err := convert(e, depth+1)
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
	}
	return v, nil
}
