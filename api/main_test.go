package api

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

// idleClosed runs the tests, then closes the keep-alive connections the
// tests' HTTP clients left idle in http.DefaultTransport (their read and
// write loops would otherwise count as leaks; they are a pool, not a leak).
type idleClosed struct{ m *testing.M }

func (c idleClosed) Run() int {
	code := c.m.Run()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	return code
}

// Every test leaves no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(idleClosed{m})
}
