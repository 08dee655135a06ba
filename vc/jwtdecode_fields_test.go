package vc

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestJWTDecodeKnowsEveryField: the hand-written VC-JWT decoder reads
// members by the names in its lists, so a field added to a claims struct
// but not to its list would be silently dropped (this happened once, with
// delegation.parentCredentialUrl). Every json tag must be listed.
func TestJWTDecodeKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		typ   reflect.Type
		names []string
	}{
		{reflect.TypeFor[jwsHeader](), headerNames},
		{reflect.TypeFor[jwtPayload](), payloadNames},
		{reflect.TypeFor[credential](), credentialNames},
		{reflect.TypeFor[subject](), subjectNames},
		{reflect.TypeFor[delegationClaim](), delegationNames},
		{reflect.TypeFor[constraints](), constraintNames},
	} {
		for _, tag := range jsonTags(tc.typ) {
			if !slices.Contains(tc.names, tag) {
				t.Errorf("%s: member %q is not read by the VC-JWT decoder", tc.typ.Name(), tag)
			}
		}
	}
}

// jsonTags lists the json names of t's fields, embedded structs included.
func jsonTags(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonTags(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
