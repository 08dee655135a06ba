package jsonscan

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
