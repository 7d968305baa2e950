package lookup

import (
	"bytes"
	"encoding/csv"
	"errors"
	"testing"

	"github.com/valyala/fastjson"
)

// FuzzParse checks that Parse never panics and is all or nothing: a
// refused upload is a known error kind; an accepted one has one row per
// CSV record, unique non-blank keys, and every row a JSON object that
// starts with its own key.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"id,v\na,1\nb,2.5\n",
		"\uFEFFid,n,t,l,d\r\nk,TRUE,2024-01-02T03:04:05+02:00,\"[\"\"x\"\"]\",02134\r\n",
		"id,v\n,1\na,1\na,2\nb\nc,\"open\n",
		"id,v,v\n", "id\n", "", "id,v\nk,x\"y\n", "id,v\nk,\xff\n",
		"id,v\nk,\"multi\nline\"\n\n\nk2,[]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := Parse(bytes.NewReader(data), Options{MaxBytes: 4 << 10, MaxRowBytes: 1 << 10})
		if err != nil {
			if tab != nil {
				t.Fatal("a table and an error")
			}
			checkError(t, err)
			return
		}
		cols := tab.Columns()
		if len(cols) < 2 {
			t.Fatalf("%d columns", len(cols))
		}
		seen := map[string]bool{}
		for i := range tab.Len() {
			key, row := tab.Key(i), tab.Row(i)
			if key == "" || seen[key] {
				t.Fatalf("row %d: key %q blank or repeated", i, key)
			}
			seen[key] = true
			v, err := fastjson.ParseBytes(row)
			if err != nil {
				t.Fatalf("row %d: %s is not JSON: %v", i, row, err)
			}
			o, err := v.Object()
			if err != nil || o.Len() < 1 || string(v.GetStringBytes(cols[0])) != key {
				t.Fatalf("row %d: %s is not an object holding its key %q", i, row, key)
			}
			if got, ok := tab.Lookup(key); !ok || !bytes.Equal(got, row) {
				t.Fatalf("Lookup(%q) = %s, %v", key, got, ok)
			}
		}
		// encoding/csv agrees on the number of records.
		r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\uFEFF"))))
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		if err != nil || len(recs) != tab.Len()+1 {
			t.Fatalf("encoding/csv: %d records, %v; table has %d rows", len(recs), err, tab.Len())
		}
	})
}

func checkError(t *testing.T, err error) {
	if errors.Is(err, ErrTooLarge) {
		return
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("unexpected error kind: %v", err)
	}
	var re *RowErrors
	if !errors.As(err, &re) {
		return // a header error
	}
	if len(re.Rows) == 0 || len(re.Rows) > MaxReportedErrors || re.Total < len(re.Rows) {
		t.Fatalf("%d rows reported of %d", len(re.Rows), re.Total)
	}
	for i, r := range re.Rows {
		if r.Row < 1 || r.Line < 2 || r.Message == "" || (i > 0 && r.Row <= re.Rows[i-1].Row) {
			t.Fatalf("bad report %+v in %v", r, re.Rows)
		}
	}
}
