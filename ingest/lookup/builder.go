package lookup

import (
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/internal/jsonw"
)

// Builder assembles a Table from rows whose values are already typed JSON,
// as a warehouse import produces them, under the upload's rules: keys are
// non-empty and unique, and the table stays within the size limit.
type Builder struct {
	t        Table
	maxBytes int64
}

// NewBuilder starts a table; columns[0] is the key column.
func NewBuilder(columns []string, opt Options) *Builder {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	return &Builder{t: Table{columns: columns, index: map[string]int{}}, maxBytes: opt.MaxBytes}
}

// errNULKey refuses U+0000 in a key, as profiles refuse it in ids:
// PostgreSQL text cannot hold it, so one such key failed the whole table's
// replacement on that store (the row's cells are JSON, where it is escaped).
const errNULKey = "primary key must not contain the NUL character (U+0000)"

// Add appends a row: props is a compact JSON object of the other columns.
func (b *Builder) Add(key string, props []byte) error {
	t := &b.t
	if key == "" {
		return fmt.Errorf("%w: primary key is required and cannot be blank", ErrInvalid)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, errNULKey)
	}
	if _, dup := t.index[key]; dup {
		return fmt.Errorf("%w: duplicate primary key %q", ErrInvalid, key)
	}
	if len(props) < 2 || props[0] != '{' {
		return fmt.Errorf("%w: row %q is not a JSON object", ErrInvalid, key)
	}
	t.buf = append(t.buf, '{')
	t.buf = jsonw.String(t.buf, t.columns[0])
	t.buf = append(t.buf, ':')
	t.buf = jsonw.String(t.buf, key)
	if len(props) > 2 {
		t.buf = append(t.buf, ',')
	}
	t.buf = append(t.buf, props[1:]...)
	if int64(len(t.buf)) > b.maxBytes {
		return ErrTooLarge
	}
	t.keys = append(t.keys, key)
	t.ends = append(t.ends, len(t.buf))
	t.index[key] = len(t.keys)
	return nil
}

// Table returns the table built so far; the Builder must not be used after.
func (b *Builder) Table() *Table { return &b.t }
