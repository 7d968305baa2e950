//go:build !unix

package duckstore

import "errors"

// mapAnon is unix-only; elsewhere filters stay on the Go heap.
func mapAnon(int) ([]byte, error) { return nil, errors.New("no anonymous mappings") }

func unmap([]byte) error { return nil }
