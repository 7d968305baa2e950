package run

import (
	"context"
	"log/slog"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/pgtest"
)

// feedLeft reports whether the warehouse still holds the slot and the
// publication of feed.
func feedLeft(t *testing.T, db pgtest.DB, feed string) (slot, pub bool) {
	t.Helper()
	ctx := context.Background()
	if err := db.Conn.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_replication_slots WHERE slot_name = $1`, feed).Scan(&slot); err != nil {
		t.Fatal(err)
	}
	if err := db.Conn.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_publication WHERE pubname = $1`, feed).Scan(&pub); err != nil {
		t.Fatal(err)
	}
	return slot, pub
}

// A Mirror import no longer listed (its file left imports_dir) loses its
// state and its real Postgres slot and publication, as a DELETE does.
// Without its source configured anywhere the state still goes and the
// feed is kept (and logged) until a start finds the source; imports
// still listed keep everything.
func TestForgetRemovedMirrors(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			db := pgtest.Database(t, "tributary_mirrorends", "dropping a removed Mirror import's slot is")
			st := sc.open(t)
			f := newMirrorFixtureOn(t, st, &pgWarehouse{db: db}, kinds.Registry(),
				func(k string) (string, bool) { return db.DSN, k == "MIRROR_PG_DSN" },
				`source: {kind: postgres, dsn: "${MIRROR_PG_DSN}"}`+"\ntable_params: {table: ev}\n")
			f.sync("first", 4, 0, 0)
			feed := FeedName(f.im)
			if slot, pub := feedLeft(t, db, feed); !slot || !pub {
				t.Fatalf("after the first run: slot %v publication %v, want both", slot, pub)
			}
			kept := newMirrorFixture(t, st, "id: kept\nimport_type: event_stream\ntable_params: {table: ev}\nevent_name: e\ntime_column_name: t\nuser_column_name: uid\n",
				mirrorEventTable...)
			kept.sync("kept", 4, 0, 0)
			ms := st.(store.Mirrors)
			count := func(id string) int64 {
				n, err := ms.MirrorCount(ctx, 1, id)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			notes := func() []string {
				ns, err := st.(store.MirrorSources).MirrorSources(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, n := range ns {
					ids = append(ids, n.Import)
				}
				return ids
			}
			known := func(_ int64, id string) bool { return id == "kept" }
			log := slog.New(slog.NewTextHandler(testLog{t}, nil))

			// The source is nowhere: the state goes, the feed stays noted.
			if err := ForgetRemovedMirrors(ctx, kinds.Registry(), st, KnownSources{}, known, log); err != nil {
				t.Fatal(err)
			}
			if n := count(f.im.ID); n != 0 {
				t.Fatalf("state of the removed import: %d keys", n)
			}
			if slot, pub := feedLeft(t, db, feed); !slot || !pub {
				t.Fatalf("source unknown: slot %v publication %v dropped", slot, pub)
			}
			if got := notes(); len(got) != 2 {
				t.Fatalf("notes %v, want both", got)
			}
			// Another import or connection with the same source: dropped.
			srcs := KnownSources{Configs: []connectors.Config{kept.im.SourceConfig(), f.im.SourceConfig()}}
			if err := ForgetRemovedMirrors(ctx, kinds.Registry(), st, srcs, known, log); err != nil {
				t.Fatal(err)
			}
			if slot, pub := feedLeft(t, db, feed); slot || pub {
				t.Fatalf("after the removal: slot %v publication %v left", slot, pub)
			}
			if got := notes(); len(got) != 1 || got[0] != "kept" {
				t.Fatalf("notes %v, want [kept]", got)
			}
			if n := count("kept"); n != 4 {
				t.Fatalf("the listed import's state: %d keys, want 4", n)
			}
			// By connection name too (the config's connections).
			f.sync("again", 4, 0, 0)
			src := f.im.SourceConfig()
			f.im.Connection = "wh"
			f.im.Source = nil
			// Noted as a connection's import.
			if err := st.(store.MirrorSources).MirrorForgetSource(ctx, 1, f.im.ID); err != nil {
				t.Fatal(err)
			}
			(&Runner{Store: st}).noteMirrorSource(ctx, f.im)
			srcs = KnownSources{Connection: func(id string, project int64) (connectors.Config, error) {
				if id != "wh" {
					t.Fatalf("connection %q asked", id)
				}
				return src, nil
			}}
			if err := ForgetRemovedMirrors(ctx, kinds.Registry(), st, srcs, known, log); err != nil {
				t.Fatal(err)
			}
			if slot, pub := feedLeft(t, db, feed); slot || pub {
				t.Fatalf("by connection: slot %v publication %v left", slot, pub)
			}
		})
	}
}

// testLog sends a logger's lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
