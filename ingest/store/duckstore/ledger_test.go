package duckstore

import (
	"context"
	"path/filepath"
	"testing"
)

// TestPruneLedgerDropsOrphans: entries whose run row is gone (left by a
// prune during a run, before the loader inserted run rows again) are
// unreachable by LedgerHistory; a prune deletes them whatever the cut.
func TestPruneLedgerDropsOrphans(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	for _, q := range []string{
		`INSERT INTO sync_ledger_rows VALUES (7, 1, 0), (7, 2, 0)`,
		`INSERT INTO sync_ledger_refused VALUES (7, 3, 'f', 'r')`,
	} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PruneLedger(context.Background(), 0); err != nil || n != 3 {
		t.Fatalf("prune: %d, %v; want the 3 orphaned entries", n, err)
	}
}
