package identity

import (
	"encoding/binary"
	"fmt"
)

// Kind says what a Change records.
type Kind uint8

const (
	KindMerge    Kind = iota + 1 // $merge: A and B are the two $distinct_ids
	KindIdentify                 // $identify: A is $identified_id, B is $anon_id
	KindAlias                    // $create_alias: A is alias, B is distinct_id
	KindLink                     // Simplified: A is $user_id, B is $device_id (no prefix)
)

func (k Kind) String() string {
	switch k {
	case KindMerge:
		return "$merge"
	case KindIdentify:
		return "$identify"
	case KindAlias:
		return "$create_alias"
	case KindLink:
		return "link"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Change is one accepted identity change: the unit of the change log. It is
// plain data (a store may keep it as three columns) with a compact binary
// form: the kind byte, then A and B each as a uvarint length and bytes.
type Change struct {
	Kind Kind
	A, B string
}

// AppendBinary appends the binary form of c (encoding.BinaryAppender).
func (c Change) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, byte(c.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(c.A)))
	dst = append(dst, c.A...)
	dst = binary.AppendUvarint(dst, uint64(len(c.B)))
	return append(dst, c.B...), nil
}

// MarshalBinary returns the binary form of c.
func (c Change) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(make([]byte, 0, 3+len(c.A)+len(c.B)))
}

// UnmarshalBinary decodes exactly one Change.
func (c *Change) UnmarshalBinary(data []byte) error {
	d, n, err := DecodeChange(data)
	if err != nil {
		return err
	}
	if n != len(data) {
		return fmt.Errorf("identity: %d bytes after the change: %w", len(data)-n, ErrCorruptLog)
	}
	*c = d
	return nil
}

// DecodeChange decodes the Change at the start of data and returns it with
// the number of bytes it took, so a log of concatenated changes can be read
// in one pass.
func DecodeChange(data []byte) (Change, int, error) {
	if len(data) == 0 {
		return Change{}, 0, fmt.Errorf("identity: empty change record: %w", ErrCorruptLog)
	}
	c := Change{Kind: Kind(data[0])}
	if c.Kind < KindMerge || c.Kind > KindLink {
		return Change{}, 0, fmt.Errorf("identity: unknown change kind %d: %w", data[0], ErrCorruptLog)
	}
	n := 1
	for _, s := range []*string{&c.A, &c.B} {
		l, k := binary.Uvarint(data[n:])
		if k <= 0 || l > uint64(len(data)-n-k) {
			return Change{}, 0, fmt.Errorf("identity: truncated change record: %w", ErrCorruptLog)
		}
		n += k
		*s = string(data[n : n+int(l)])
		n += int(l)
	}
	return c, n, nil
}
