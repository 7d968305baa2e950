package store

// SpliceProps appends to dst the JSON object props with the members of the
// JSON object common after its own: what a scan returns for an event
// written in a batch with Common. Both must be objects as the validator
// writes them ("{}" at least, no whitespace around the braces).
func SpliceProps(dst, props, common []byte) []byte {
	if len(common) <= 2 { // "{}": nothing to add
		return append(dst, props...)
	}
	if len(props) <= 2 {
		return append(dst, common...)
	}
	dst = append(dst, props[:len(props)-1]...)
	dst = append(dst, ',')
	return append(dst, common[1:]...)
}
