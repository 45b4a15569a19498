// Package jsonline encodes the JSON that people read as well as programs:
// the state file, the journal and the control socket's replies.
package jsonline

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping: reasons such as
// "watermark 0.94 > 0.90" stay readable in the file and in grep, rather
// than "\u003e". The result has no trailing newline.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
