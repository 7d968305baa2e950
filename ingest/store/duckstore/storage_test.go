package duckstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// propsCompression is the set of methods DuckDB used for the props column.
func propsCompression(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	if _, err := s.db.Exec(`CHECKPOINT`); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.Query(`SELECT DISTINCT compression FROM pragma_storage_info('events')
		WHERE column_name = 'props' AND segment_type = 'VARCHAR'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		got[c] = true
	}
	return got
}

// writeAndCount stores n events and returns how many the project holds.
func writeAndCount(t *testing.T, s *Store, n int, prefix string) int {
	t.Helper()
	evs := make([]store.Event, n)
	for i := range evs {
		evs[i] = storetest.NewEvent(1, "Signed Up", "user-"+strconv.Itoa(i), 1_700_000_000_000+int64(i),
			prefix+strconv.Itoa(i), `{"plan":"pro","seats":`+strconv.Itoa(i%40)+`,"source":"storage test"}`)
	}
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	count := 0
	err := s.ScanEvents(context.Background(), store.Scan{Project: 1, ToMs: 1 << 62}, func(e *store.Event) error {
		count++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return count
}

func TestNewFileStoresPropsWithZSTD(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "new.duckdb"))
	defer s.Close()
	if got := writeAndCount(t, s, 3000, "n"); got != 3000 {
		t.Fatalf("scanned %d events, want 3000", got)
	}
	if got := propsCompression(t, s); !got["ZSTD"] || len(got) != 1 {
		t.Fatalf("props compressed with %v, want only ZSTD", got)
	}
}

// A file made before storageVersion (DuckDB's default format, FSST
// columns) opens, takes new events and still reads; it is not converted.
func TestOldFormatFileStillWorks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.duckdb")
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range schema[:2] { // schema_version and the FSST events table
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	before := fileStorageVersion(t, db)
	if before == storageVersion+"+" {
		t.Fatalf("the library's default format is already %s: this test no longer makes an old file", before)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, path)
	if got := writeAndCount(t, s, 3000, "o"); got != 3000 {
		t.Fatalf("scanned %d events, want 3000", got)
	}
	if got := propsCompression(t, s); !got["FSST"] || got["ZSTD"] {
		t.Fatalf("props of the old file compressed with %v, want FSST", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	defer s.Close()
	if got := writeAndCount(t, s, 3000, "p"); got != 6000 {
		t.Fatalf("after reopening, scanned %d events, want 6000", got)
	}
	if after := fileStorageVersion(t, s.db); after != before {
		t.Fatalf("the old file's format changed from %s to %s", before, after)
	}
}

// fileStorageVersion is the storage format DuckDB reports for db's file.
func fileStorageVersion(t *testing.T, db *sql.DB) string {
	t.Helper()
	var v string
	err := db.QueryRow(`SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = current_database()`).Scan(&v)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
