package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// /import spread over three processes on one PostgreSQL store, one of
// them killed with SIGKILL under load: every acknowledged record is
// stored exactly once. A batch whose request died with the process may or
// may not have committed; the client retries it on another process, as
// an SDK would, and dedup keeps that from storing anything twice.
func TestPGImportAcrossProcessesWithKill(t *testing.T) {
	st := newPGDB(t)
	cfg := defaultConfig()
	cfg.Store, cfg.SyncLease = storeURL(t, st), mpLease
	servers := startCluster(t, 3, cfg)
	victim := servers[1]
	var dead atomic.Bool

	const workers, batch = 6, 200
	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		retried  atomic.Int64
		requests atomic.Int64
	)
	stop := make(chan struct{})
	// send posts one batch until some process acknowledges it.
	send := func(w, k int, body []byte, ids []string) error {
		for attempt := 0; ; attempt++ {
			s := servers[(w+k+attempt)%3]
			if s == victim && dead.Load() {
				continue
			}
			requests.Add(1)
			r, err := s.try(request{Path: "/import", Auth: asSecret, Body: body})
			if err == nil && r.Status == http.StatusOK {
				var m map[string]any
				if json.Unmarshal(r.Body, &m) != nil || m["num_records_imported"] != float64(len(ids)) {
					return fmt.Errorf("import answered %s", r)
				}
				mu.Lock()
				for _, id := range ids {
					acked[id] = true
				}
				mu.Unlock()
				return nil
			}
			if err == nil && r.Status != http.StatusServiceUnavailable {
				return fmt.Errorf("import answered %s", r)
			}
			if attempt > 20 {
				return fmt.Errorf("batch not acknowledged after %d attempts: %v %v", attempt, r, err)
			}
			retried.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	}
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			at := time.Now().Add(-time.Hour)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				evs := make([]map[string]any, batch)
				ids := make([]string, batch)
				for j := range evs {
					ids[j] = fmt.Sprintf("w%d-%d-%d", w, k, j)
					evs[j] = event("load", fmt.Sprintf("user-%d", j%50), ids[j], at.Add(time.Duration(k*batch+j)*time.Millisecond), map[string]any{"w": w})
				}
				body, _ := json.Marshal(evs)
				if err := send(w, k, body, ids); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	time.Sleep(4 * time.Second)
	dead.Store(true)
	victim.Kill()
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	perID := map[string]int{}
	rows, err := st.conn.Query(context.Background(), `SELECT insert_id, count(*) FROM events
		WHERE project = $1 AND name = 'load' GROUP BY insert_id`, mainID)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { perID[id] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	for id, n := range perID {
		if n != 1 {
			t.Fatalf("$insert_id %s stored %d times", id, n)
		}
	}
	for id := range acked {
		if perID[id] != 1 {
			t.Fatalf("acknowledged record %s is not stored", id)
		}
	}
	// Every batch was retried until acknowledged, so nothing else is there.
	if len(perID) != len(acked) {
		t.Fatalf("%d records stored, %d acknowledged", len(perID), len(acked))
	}
	t.Logf("%d records acknowledged over %d requests (%d retried after the kill), each stored once", len(acked), requests.Load(), retried.Load())
	// The export of a survivor agrees (dedup on read included).
	_, exported := exportIDs(t, servers[0])
	if len(exported) != len(acked) {
		t.Fatalf("export holds %d ids, want %d", len(exported), len(acked))
	}
}
