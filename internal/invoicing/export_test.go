package invoicing

import "github.com/cardhour/cardhour/billing/export"

// SetRenderHook lets tests see the documents each rendering gets (the void
// mark is on them, not in the stored bytes); it returns a function that
// removes the hook.
func SetRenderHook(f func(f Format, ds []*export.Document)) func() {
	renderHook = f
	return func() { renderHook = nil }
}
