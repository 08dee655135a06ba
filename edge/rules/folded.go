package rules

import (
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// A member a rule names may be given in another letter case: a rule
// reading arguments.to finds no "to" in {"TO": "mallory"}, so has() is
// false, while an upstream decoding with Go's encoding/json (which folds
// case, "ſ" U+017F included) reads "TO" as its field "to". The two would
// decide on different arguments, so such a read is an error (the call is
// refused as a policy error) rather than an absent member.

// keyFolds reports whether the quoted key q folds to name (see jsonkey).
func keyFolds(q []byte, name string) bool {
	return jsonkey.FoldsTo(jsonscan.Unquote(q), name)
}

// foldedMember is the error of reading a member that is absent but given
// in another letter case.
func foldedMember(name string) ref.Val {
	return types.WrapErr(fmt.Errorf("%w: the member %q is given in another letter case, which an upstream may read as %q; refused rather than read as absent", ErrArguments, name, name))
}
