package run

import "time"

// Watermark is the insert time of the newest row a time_based import has
// committed, read from its checkpoint; ok is false when the checkpoint
// holds none (another sync mode, no run yet, a non-time insert column).
func Watermark(checkpoint []byte) (t time.Time, ok bool) {
	c, err := decodeCursor(checkpoint)
	if err != nil || c == nil || c.Values[0].T == nil {
		return time.Time{}, false
	}
	return *c.Values[0].T, true
}
