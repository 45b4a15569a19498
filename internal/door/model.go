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
// One pass over the body (scanJSON) both validates it and finds the two
// members; nothing but the name is allocated, and the rest of a body (a
// long prompt, images) is never decoded.
func bodyModel(body []byte) (named, error) {
	top, ok := scanJSON(body)
	if !ok {
		return named{}, errNotJSON
	}
	span := top.model
	if span[1] == 0 {
		span = top.name
	}
	if span[1] == 0 || body[span[0]] != '"' {
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
