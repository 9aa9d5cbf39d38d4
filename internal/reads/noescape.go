package reads

import (
	"bytes"
	"encoding/json"
)

// MarshalNoEscape is json.Marshal without escaping <, > and &: the
// MarshalJSON methods of the types the API serves write with it, so that
// the encoder of the enclosing value decides (the API's does not escape,
// json.Marshal does), as for a value without such a method.
func MarshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
