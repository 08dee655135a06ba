package authserver

import (
	"encoding/json"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// readStrict decodes one JSON object from an untrusted peer into v. It
// refuses what encoding/json would read ambiguously: a member name repeated
// in any letter case, or a variant spelling of a known name (a lone
// "Redirect_URIs"), so that the edge reads what every other reader reads.
func readStrict(b []byte, v any, known ...string) error {
	if _, err := jsonscan.Object(b, known...); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
