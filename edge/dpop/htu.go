package dpop

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

var errHTU = errors.New("not an absolute http or https URL")

// normalizeHTU returns the form of an http(s) URL that htu and the request
// URL are compared in (RFC 9449 §4.3: without query and fragment, after
// the syntax- and scheme-based normalisation of RFC 3986 §6.2.2 and
// §6.2.3): scheme and host in lower case, the scheme's default port
// dropped, an empty path as "/", percent-encodings in upper case and those
// of unreserved characters decoded, dot segments removed. Two spellings
// of one resource compare equal; nothing else does. A URL with user
// information is refused: no request URL carries one.
func normalizeHTU(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" || u.User != nil {
		return "", errHTU
	}
	scheme := strings.ToLower(u.Scheme)
	var defPort string
	switch scheme {
	case "https":
		defPort = "443"
	case "http":
		defPort = "80"
	default:
		return "", errHTU
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errHTU
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return "", errHTU
		}
		if p = strconv.FormatUint(n, 10); p != defPort {
			host += ":" + p
		}
	}
	path, err := normalizePercent(u.EscapedPath())
	if err != nil {
		return "", errHTU
	}
	path = removeDotSegments(path)
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, nil
}

// normalizePercent upper-cases the hex digits of every percent-encoding in
// p and decodes those of unreserved characters (RFC 3986 §6.2.2.2).
func normalizePercent(p string) (string, error) {
	if !strings.Contains(p, "%") {
		return p, nil
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
			return "", errHTU
		}
		c := unhex(p[i+1])<<4 | unhex(p[i+2])
		if isUnreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(p[i+1:i+3]))
		}
		i += 2
	}
	return b.String(), nil
}

// removeDotSegments is RFC 3986 §5.2.4 over an absolute path.
func removeDotSegments(in string) string {
	if !strings.Contains(in, ".") {
		return in
	}
	var out []string
	segs := strings.Split(in, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return strings.Join(out, "/")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
