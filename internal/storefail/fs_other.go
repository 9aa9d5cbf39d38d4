//go:build !linux

package storefail

// fsCause knows nothing of the file system here.
func fsCause(string) string { return "" }
