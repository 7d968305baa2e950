package wal

import "syscall"

// oDSync makes each write durable before it returns (data and the size
// needed to read it back, like write+fdatasync) in one system call.
const oDSync = syscall.O_DSYNC
