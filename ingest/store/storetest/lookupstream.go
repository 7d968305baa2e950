package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

// The tables span several batches: small ones, so that the Postgres
// harness paging its scans two rows at a time stays quick.
const (
	streamBatch = 100
	streamRows  = 3*streamBatch + 50
)

// lookupCSV is a table of n rows k0…k(n-1) whose v column is version;
// spoil(i) may replace row i's line (without its newline).
func lookupCSV(n, version int, spoil func(i int) string) string {
	var b strings.Builder
	b.WriteString("id,v,name\n")
	for i := range n {
		line := fmt.Sprintf("k%d,%d,name %d", i, version, i)
		if spoil != nil {
			if s := spoil(i); s != "" {
				line = s
			}
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func lookupStream(t *testing.T, csv string, opt lookup.Options) *lookup.Stream {
	t.Helper()
	s, err := lookup.NewStream(strings.NewReader(csv), opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkLookupVersion asserts that the table holds exactly n rows, all of
// version: what a reader may see of a replacement is all or nothing.
func checkLookupVersion(t testing.TB, s store.Store, n, version int) error {
	rows, versions := 0, map[string]int{}
	err := s.ScanLookup(context.Background(), 1, "items", func(key string, row []byte) error {
		rows++
		v := string(row[strings.Index(string(row), `"v":`)+4:])
		v = v[:strings.IndexByte(v, ',')]
		versions[v]++
		return nil
	})
	if err != nil {
		return err
	}
	if want := fmt.Sprint(version); rows != n || len(versions) != 1 || versions[want] != n {
		return fmt.Errorf("table holds %d rows of versions %v, want %d rows of version %d", rows, versions, n, version)
	}
	return nil
}

// testLookupStreamRollback: an upload streams in batches, and a bad row,
// a key repeated from an earlier batch or an oversized body late in it
// rolls the whole replacement back, naming the row.
func testLookupStreamRollback(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	if err := hd.s.ReplaceLookup(ctx, 1, "items", lookupStream(t, lookupCSV(streamRows, 1, nil), lookup.Options{BatchRows: streamBatch})); err != nil {
		t.Fatal(err)
	}
	if err := checkLookupVersion(t, hd.s, streamRows, 1); err != nil {
		t.Fatal(err)
	}
	late := streamRows - 10 // in the last batch
	cases := []struct {
		name  string
		spoil func(i int) string
		opt   lookup.Options
		row   int    // data row the error names; 0: ErrTooLarge
		msg   string // in the row's message
	}{
		{"field count", func(i int) string {
			if i == late-1 {
				return "kx,2"
			}
			return ""
		}, lookup.Options{BatchRows: streamBatch}, late, "wrong number of fields"},
		{"blank key", func(i int) string {
			if i == late-1 {
				return " ,2,x"
			}
			return ""
		}, lookup.Options{BatchRows: streamBatch}, late, "primary key is required"},
		{"key from an earlier batch", func(i int) string {
			if i == late-1 {
				return "k7,2,again"
			}
			return ""
		}, lookup.Options{BatchRows: streamBatch}, late, `duplicate primary key "k7"`},
		{"too large", nil, lookup.Options{BatchRows: streamBatch, MaxBytes: int64(len(lookupCSV(streamRows, 2, nil)) - 100)}, 0, ""},
	}
	for _, tc := range cases {
		src := lookupStream(t, lookupCSV(streamRows, 2, tc.spoil), tc.opt)
		err := hd.s.ReplaceLookup(ctx, 1, "items", src)
		var rowErrs *lookup.RowErrors
		switch {
		case tc.row == 0:
			if !errors.Is(err, lookup.ErrTooLarge) {
				t.Errorf("%s: %v, want ErrTooLarge", tc.name, err)
			}
		case !errors.As(err, &rowErrs) || len(rowErrs.Rows) != 1 || rowErrs.Rows[0].Row != tc.row || !strings.Contains(rowErrs.Rows[0].Message, tc.msg):
			t.Errorf("%s: %v, want row %d refused with %q", tc.name, err, tc.row, tc.msg)
		}
		if err := checkLookupVersion(t, hd.s, streamRows, 1); err != nil {
			t.Errorf("%s: after the refused upload: %v", tc.name, err)
		}
	}
	hd.reopen(t)
	if err := checkLookupVersion(t, hd.s, streamRows, 1); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
}

// pausedRows holds a replacement after its second batch until resumed, so
// that readers look at the store while the transaction is half written.
type pausedRows struct {
	store.LookupRows
	batches        int
	paused, resume chan struct{}
}

func (p *pausedRows) Next() (*lookup.Batch, error) {
	if p.batches++; p.batches == 3 {
		close(p.paused)
		<-p.resume
	}
	return p.LookupRows.Next()
}

// testLookupStreamReaders: readers during a streamed replacement see the
// old table whole, then the new one whole (or the old one again when the
// replacement fails late), never a mix.
func testLookupStreamReaders(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	if err := hd.s.ReplaceLookup(ctx, 1, "items", lookupStream(t, lookupCSV(streamRows, 1, nil), lookup.Options{BatchRows: streamBatch})); err != nil {
		t.Fatal(err)
	}
	old := 1
	for _, fail := range []bool{false, true} {
		next := old + 1
		spoil := func(i int) string {
			if fail && i == streamRows-1 {
				return fmt.Sprintf("k0,%d,repeated", next)
			}
			return ""
		}
		src := &pausedRows{LookupRows: lookupStream(t, lookupCSV(streamRows, next, spoil), lookup.Options{BatchRows: streamBatch}),
			paused: make(chan struct{}), resume: make(chan struct{})}
		done := make(chan error, 1)
		go func() { done <- hd.s.ReplaceLookup(ctx, 1, "items", src) }()
		<-src.paused
		if err := checkLookupVersion(t, hd.s, streamRows, old); err != nil {
			close(src.resume) // let the replacement end, or closing the store waits for it
			<-done
			t.Fatalf("while two batches of the new table are stored: %v", err)
		}
		// Readers race the rest of the replacement: each sees one version.
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err1 := checkLookupVersion(t, hd.s, streamRows, old); err1 != nil {
						if err2 := checkLookupVersion(t, hd.s, streamRows, next); err2 != nil || fail {
							t.Errorf("a reader during the replacement: %v / %v", err1, err2)
							return
						}
					}
				}
			})
		}
		close(src.resume)
		err := <-done
		close(stop)
		wg.Wait()
		if fail {
			if !errors.Is(err, lookup.ErrInvalid) {
				t.Fatalf("a repeated key in the last batch: %v, want a row error", err)
			}
		} else if err != nil {
			t.Fatal(err)
		} else {
			old = next
		}
		if err := checkLookupVersion(t, hd.s, streamRows, old); err != nil {
			t.Fatalf("after the replacement (fail=%v): %v", fail, err)
		}
	}
}
