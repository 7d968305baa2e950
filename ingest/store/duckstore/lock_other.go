//go:build !unix

package duckstore

import (
	"fmt"
	"os"
)

// lockFile only creates the lock file here; DuckDB's own file lock still
// keeps other processes out (see lock_unix.go for what flock adds).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	return f, nil
}
