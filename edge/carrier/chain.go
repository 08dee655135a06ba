package carrier

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// MaxAncestors is the most credentials the chain header may carry (vc
// refuses more: WithAncestors).
const MaxAncestors = 2 * vc.MaxChainDepth

// ParseChain reads the ancestors in the values of the chain header
// (Reader.TakeChain). Each value is a JSON array of credentials (VC-JWT
// strings or JSON VC objects), one JSON VC object, or VC-JWTs separated by
// commas. At most maxBytes in all and MaxAncestors credentials
// (ErrChainTooLarge); anything else is ErrChainMalformed.
func ParseChain(vals []string, maxBytes int64) ([][]byte, error) {
	var total int64
	for _, v := range vals {
		total += int64(len(v))
	}
	if total > maxBytes {
		return nil, ErrChainTooLarge
	}
	var out [][]byte
	for _, v := range vals {
		v = strings.TrimSpace(v)
		switch {
		case v == "":
		case v[0] == '[':
			var elems []json.RawMessage
			if err := json.Unmarshal([]byte(v), &elems); err != nil {
				return nil, ErrChainMalformed
			}
			for _, e := range elems {
				e = bytes.TrimSpace(e)
				switch e[0] { // json.Unmarshal leaves no empty element
				case '"':
					var s string
					if json.Unmarshal(e, &s) != nil || strings.TrimSpace(s) == "" {
						return nil, ErrChainMalformed
					}
					out = append(out, []byte(strings.TrimSpace(s)))
				case '{':
					out = append(out, e)
				default:
					return nil, ErrChainMalformed
				}
			}
		case v[0] == '{':
			if !jsonscan.Valid([]byte(v)) {
				return nil, ErrChainMalformed
			}
			out = append(out, []byte(v))
		default:
			// A JWS has no commas.
			for tok := range strings.SplitSeq(v, ",") {
				if tok = strings.TrimSpace(tok); tok != "" {
					out = append(out, []byte(tok))
				}
			}
		}
		if len(out) > MaxAncestors {
			return nil, ErrChainTooLarge
		}
	}
	return out, nil
}
