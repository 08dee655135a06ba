package jsonscan

import (
	"strings"
	"testing"
)

// strByteByByte is walker.str as it was before skipPlain: one table
// look-up per byte. It is kept as the reference that str must agree with,
// verdict and end offset, on any input (FuzzStr).
func strByteByByte(w *walker) bool {
	b := w.b
	for i := w.i + 1; i < len(b); i++ {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			w.i = i + 1
			return true
		case c == '\\':
			i++
			if i >= len(b) {
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHexDigit(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		case c < 0x20:
			return false
		}
	}
	return false
}

// checkStr compares str with strByteByByte from every '"' of in.
func checkStr(t *testing.T, in []byte) {
	t.Helper()
	for i, c := range in {
		if c != '"' {
			continue
		}
		fast, slow := walker{b: in, i: i}, walker{b: in, i: i}
		okFast, okSlow := fast.str(), strByteByByte(&slow)
		if okFast != okSlow || okFast && fast.i != slow.i {
			t.Fatalf("str(%q) from %d = %v, %d; byte by byte %v, %d", in, i, okFast, fast.i, okSlow, slow.i)
		}
	}
}

// Every byte value at every position of a word, next to the bytes whose
// borrow could disturb the eight-at-a-time test (0x00, 0x1f, 0x20, 0x21,
// '"' ± 1, '\\' ± 1, 0x7f, 0x80, 0xff), in strings that end at, before
// and after a word's boundary.
func TestStrAgreesByteByByte(t *testing.T) {
	neighbours := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7f, 0x80, 0xff, 'a'}
	for c := range 256 {
		for pos := range 17 {
			for _, n := range neighbours {
				for _, tail := range []string{`"`, `\"x"`, `\u00e9"`, `\uzz"`, ``, `\`, "\x1f\""} {
					s := []byte(`"` + strings.Repeat("a", pos))
					s = append(s, byte(c), n)
					s = append(s, tail...)
					checkStr(t, s)
				}
			}
		}
	}
	for _, s := range []string{`""`, `"`, `"a`, `"abcdefg"`, `"abcdefgh"`, `"abcdefghi"`, `"\\"`, `"\/\b\f\n\r\t"`,
		`"\u12"`, `"\u123"`, `"\u1234"`, `"\u123g"`, "\"\t\"", "\"é\xff\xfe\"", `"abcdefgh\"abcdefgh"`} {
		checkStr(t, []byte(s))
	}
}

func FuzzStr(f *testing.F) {
	for _, s := range []string{`"abcdefgh\"ijklmnop"`, "\"\x00\"", `"\u00e9abcdefghij"`, `{"a":"b","cdefghijkl":"\\"}`, proofBody} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkStr)
}

// BenchmarkStr compares str with the byte-by-byte reference over the
// strings of a proof-bearing body.
func BenchmarkStr(b *testing.B) {
	body := []byte(proofBody)
	var starts []int
	for i := 0; i < len(body); {
		if body[i] != '"' {
			i++
			continue
		}
		w := walker{b: body, i: i}
		if !w.str() {
			b.Fatal("bad string")
		}
		starts = append(starts, i)
		i = w.i
	}
	b.Run("skipPlain", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			for _, i := range starts {
				w := walker{b: body, i: i}
				if !w.str() {
					b.Fatal("bad string")
				}
			}
		}
	})
	b.Run("byteByByte", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			for _, i := range starts {
				w := walker{b: body, i: i}
				if !strByteByByte(&w) {
					b.Fatal("bad string")
				}
			}
		}
	})
}
