package reads

import (
	"bytes"
	"encoding/json"

	"github.com/cardhour/cardhour/billing"
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

// MarshalJSON writes the cost with the currency's minor digits
// (billing.FormatMoney: "5.10", never decimal's shortest "5.1").
func (g UsageGroup) MarshalJSON() ([]byte, error) {
	type plain UsageGroup
	return MarshalNoEscape(struct {
		plain
		Cost string `json:"cost"`
	}{plain(g), billing.FormatMoney(g.Cost)})
}
