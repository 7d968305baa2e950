package duckstore

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"
	"path/filepath"
	"sync"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

var testCommon = []byte(`{"$warehouse_import_id":"imp","$import":true}`)

// requireCommon checks that every event of project 1 has testCommon's
// members after its own and that n events are stored.
func requireCommon(t *testing.T, s *Store, n int) {
	t.Helper()
	got := storetest.Collect(t, s, store.Scan{Project: 1, FromMs: -1 << 62, ToMs: 1 << 62})
	if len(got) != n {
		t.Fatalf("%d events, want %d", len(got), n)
	}
	for _, e := range got {
		if want := `{"n":1,` + string(testCommon[1:]); string(e.Props) != want {
			t.Fatalf("props %s, want %s", e.Props, want)
		}
	}
}

func commonRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM common_props`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func genWithProps(n int, base int64) []store.Event {
	evs := storetest.GenEvents(1, n, base)
	for i := range evs {
		evs[i].Props = []byte(`{"n":1}`)
	}
	return evs
}

// A loader transaction that fails after it inserted a new common object
// forgets it: the retry inserts it again, once, and the events name it.
func TestCommonPropsFailedLoad(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	var once sync.Once
	s.beforeCommit = func(c *duckdb.Conn) error {
		var err error
		once.Do(func() { err = errors.New("injected failure before commit") })
		return err
	}
	evs := genWithProps(1000, 0)
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs, Common: testCommon}}); err != nil {
		t.Fatal(err)
	}
	requireCommon(t, s, len(evs))
	if n := commonRows(t, s); n != 1 {
		t.Fatalf("common_props has %d rows, want 1", n)
	}
}

// Two objects whose hashes give the same id both get a row: the second
// probes on to a free id, and a reopened store finds each by its bytes.
func TestCommonPropsIDCollision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	s := openAt(t, path)
	h := fnv.New64a()
	h.Write(testCommon)
	taken := int64(h.Sum64()>>2) | 1
	if _, err := s.db.Exec(`INSERT INTO common_props VALUES (?, '{"other":1}')`, taken); err != nil {
		t.Fatal(err)
	}
	write := func(base int64) {
		t.Helper()
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: genWithProps(100, base), Common: testCommon}}); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	requireCommon(t, s, 100)
	var id int64
	if err := s.db.QueryRow(`SELECT DISTINCT common FROM events`).Scan(&id); err != nil || id == taken {
		t.Fatalf("events name common %d (err %v); %d was taken", id, err, taken)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	defer s.Close()
	write(1000)
	requireCommon(t, s, 200)
	if n := commonRows(t, s); n != 2 {
		t.Fatalf("common_props has %d rows, want 2", n)
	}
}

// A file of schema version 1 (before common properties) opens: its events
// read as before, new ones may carry common properties, and it is marked
// version 2 so that older builds refuse it.
func TestSchemaVersion1Upgrades(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	s := openAt(t, path)
	old := genWithProps(100, 0)
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: old}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`ALTER TABLE events DROP COLUMN common`, `DROP TABLE common_props`, `UPDATE schema_version SET version = 1`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	defer s.Close()
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: genWithProps(100, 1000), Common: testCommon}}); err != nil {
		t.Fatal(err)
	}
	got := storetest.Collect(t, s, store.Scan{Project: 1, FromMs: -1 << 62, ToMs: 1 << 62})
	if len(got) != 200 || string(got[0].Props) != `{"n":1}` || string(got[199].Props) != `{"n":1,`+string(testCommon[1:]) {
		t.Fatalf("%d events, first props %s, last %s", len(got), got[0].Props, got[len(got)-1].Props)
	}
	var v int
	if err := s.db.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("schema version %d (err %v), want %d", v, err, schemaVersion)
	}
}
