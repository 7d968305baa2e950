//go:build !linux

package wal

// oDSync is 0 where O_DSYNC is not relied on: Append fsyncs after writing.
const oDSync = 0
