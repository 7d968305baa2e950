//go:build unix

package duckstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path+".lock". DuckDB locks its file
// against other processes, but its instance cache lets a second Open in the
// same process share the database, and two Stores would each hold their
// own dedup set. flock locks belong to the open file, so this refuses that
// second Open too.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is already open (by this or another process)", path)
		}
		return nil, fmt.Errorf("lock file: %w", err)
	}
	return f, nil
}
