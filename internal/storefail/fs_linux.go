package storefail

import (
	"path/filepath"
	"syscall"
)

// fsCause asks the file system holding path (or its directory, when path
// does not exist) whether it is mounted read-only or has no space left.
func fsCause(path string) string {
	if path == "" {
		return ""
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
			return ""
		}
	}
	const stRdonly = 1 // ST_RDONLY
	switch {
	case st.Flags&stRdonly != 0:
		return "read-only file system"
	case st.Bavail == 0:
		return "disk full"
	}
	return ""
}
