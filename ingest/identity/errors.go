package identity

import (
	"errors"
	"fmt"
)

// Every refusal wraps one of these, to be checked with errors.Is. A refused
// change leaves the Graph exactly as it was; the event that carried it is
// still ingested.
var (
	// ErrInvalidID: an id is empty, or a $user_id carries the $device: prefix.
	ErrInvalidID = errors.New("identity: invalid id")
	// ErrWrongMode: the change belongs to the other ID management mode
	// (Simplified ignores $merge, $identify and $create_alias).
	ErrWrongMode = errors.New("identity: not used in this ID management mode")
	// ErrClusterFull: the merge would make a cluster of more than
	// MaxClusterSize ids. The error is a *ClusterLimitError.
	ErrClusterFull = errors.New("identity: cluster limit exceeded")
	// ErrNotUUIDv4: $identify merges only when $anon_id is a UUIDv4 or a
	// "$device:" id.
	ErrNotUUIDv4 = errors.New("identity: $anon_id is neither a UUIDv4 nor a $device: id")
	// ErrAnonMerged: the $anon_id is already merged with another
	// $identified_id.
	ErrAnonMerged = errors.New("identity: $anon_id already merged with another $identified_id")
	// ErrAliasTaken: the alias already maps to a different distinct_id.
	ErrAliasTaken = errors.New("identity: alias already maps to another distinct_id")
	// ErrDeviceLinked: the device is already linked to another user, and
	// keeps that first link.
	ErrDeviceLinked = errors.New("identity: device already linked to another user")
	// ErrCorruptLog: a change record cannot be decoded, or a logged change
	// does not apply on replay (the log and the state diverged).
	ErrCorruptLog = errors.New("identity: corrupt change log")
)

// ClusterLimitError reports a merge refused by the cluster limit, with the
// sizes involved, so operators can see which identity graph is overgrown.
type ClusterLimitError struct {
	A, B         string // the ids whose clusters were to be merged
	SizeA, SizeB int    // their cluster sizes (1 for an id never seen)
}

func (e *ClusterLimitError) Error() string {
	return fmt.Sprintf("identity: merging %q (cluster of %d) with %q (cluster of %d) would exceed %d ids",
		e.A, e.SizeA, e.B, e.SizeB, MaxClusterSize)
}

func (e *ClusterLimitError) Unwrap() error { return ErrClusterFull }
