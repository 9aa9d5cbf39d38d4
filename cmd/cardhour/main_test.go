package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
