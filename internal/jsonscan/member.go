package jsonscan

import (
	"bytes"
	"encoding/json"
)

// Member returns the raw value of the top-level member name of the object
// obj (compared after unquoting), or nil when obj is not a valid object or
// has no such member. With repeats (which CheckMembers refuses) the last
// one is returned, as encoding/json would decode it.
func Member(obj []byte, name string) []byte {
	var v []byte
	if !Walk(obj, func(k, val []byte) {
		if string(Unquote(k)) == name {
			v = val
		}
	}) {
		return nil
	}
	return v
}

// SetMember returns the object obj with its top-level member name set to
// val: replaced where it stands, or appended when absent. Every other
// member is kept byte for byte, so that an edit to one member (a _meta)
// leaves what a signature covers unchanged. obj must be a valid object
// without repeated names (CheckMembers) and val one JSON value.
func SetMember(obj []byte, name string, val []byte) []byte {
	qname, _ := json.Marshal(name)
	var b bytes.Buffer
	b.Grow(len(obj) + len(val) + len(qname) + 2)
	b.WriteByte('{')
	n, done := 0, false
	Walk(obj, func(k, v []byte) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.Write(k)
		b.WriteByte(':')
		if string(Unquote(k)) == name {
			b.Write(val)
			done = true
			return
		}
		b.Write(v)
	})
	if !done {
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(qname)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes()
}
