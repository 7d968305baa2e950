package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// TestAlertsClaimedOnce: processes claiming from one outbox at once each
// get different alerts (FOR UPDATE SKIP LOCKED), never the same one.
func TestAlertsClaimedOnce(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	var alerts []store.Alert
	for i := range 200 {
		alerts = append(alerts, store.Alert{ID: fmt.Sprintf("al%03d", i), Destination: "hook", Project: 1, Import: "imp",
			Kind: "run_failed", Body: []byte(`{}`), CreatedMs: int64(i), NextMs: 0})
	}
	if err := a.RaiseAlerts(ctx, alerts, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		s := store.Store(a)
		if w%2 == 1 {
			s = b
		}
		owner := fmt.Sprintf("proc%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.ClaimAlerts(ctx, owner, 10, 1<<40, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				for _, al := range got {
					mu.Lock()
					if prev, ok := seen[al.ID]; ok {
						t.Errorf("alert %s claimed by %s and %s", al.ID, prev, owner)
					}
					seen[al.ID] = owner
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != len(alerts) {
		t.Fatalf("claimed %d alerts, want %d", len(seen), len(alerts))
	}
}
