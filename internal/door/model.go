package door

import (
	"encoding/json"
	"errors"
)

// Why a body names no model: the two 400s of the contract.
var (
	errNotJSON = errors.New("the body is not JSON")
	errNoModel = errors.New("the body names no model")
)

// named is the model a body names, and where the JSON string naming it
// lies in the body (start at its opening quote, end after its closing
// one), so that an alias can be replaced in place.
type named struct {
	model      string
	start, end int
}

// bodyModel finds the model a JSON body names: its top-level "model" when
// that is a string, else, with no "model" at all, its top-level "name"
// when that is one (older Ollama clients send /api/show and /api/pull so).
// A "model" that is not a string, a body that is not an object, or an
// empty name are errNoModel; a body that is not JSON is errNotJSON. As
// encoding/json does, the last of repeated keys counts.
//
// It validates the body and then walks only its top level, allocating
// nothing but the name: the rest of a body (a long prompt, images) is
// skipped, never decoded.
func bodyModel(body []byte) (named, error) {
	if !json.Valid(body) {
		return named{}, errNotJSON
	}
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return named{}, errNoModel
	}
	var model, name [2]int // value spans; [0] == 0: key absent
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		kEnd := skipString(body, i)
		key := body[i+1 : kEnd-1]
		v := skipSpace(body, skipSpace(body, kEnd)+1) // past ':'
		vEnd := skipValue(body, v)
		switch {
		case keyIs(key, "model"):
			model = [2]int{v, vEnd}
		case keyIs(key, "name"):
			name = [2]int{v, vEnd}
		}
		i = skipSpace(body, vEnd)
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	span := model
	if span[0] == 0 {
		span = name
	}
	if span[0] == 0 || body[span[0]] != '"' {
		return named{}, errNoModel
	}
	s, err := unquote(body[span[0]:span[1]])
	if err != nil || s == "" {
		return named{}, errNoModel
	}
	return named{model: s, start: span[0], end: span[1]}, nil
}

// keyIs compares a raw (still escaped) key with a plain one; a key with
// escapes is decoded first ("mod\u0065l" is "model" to encoding/json too).
func keyIs(raw []byte, want string) bool {
	if plainASCII(raw) {
		return string(raw) == want
	}
	var s string
	return json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) == nil && s == want
}

// unquote decodes a JSON string (with its quotes) as encoding/json does:
// plain ASCII directly, anything else (escapes, UTF-8, invalid UTF-8 that
// becomes U+FFFD) through it.
func unquote(q []byte) (string, error) {
	if plainASCII(q) {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

func plainASCII(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// rewrite is body with its model's string replaced by quoted (a JSON
// string), everything else as it was.
func rewrite(body []byte, n named, quoted []byte) []byte {
	out := make([]byte, 0, len(body)-(n.end-n.start)+len(quoted))
	out = append(out, body[:n.start]...)
	out = append(out, quoted...)
	return append(out, body[n.end:]...)
}

// The skips below walk a body that json.Valid accepted, so they need not
// check what they find.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string opening at b[i].
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
	default: // a number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
			i++
		}
		return i
	}
}
