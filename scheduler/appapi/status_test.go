package appapi

import (
	"testing"
	"time"

	"github.com/tributary-dev/tributary/engine/run"
)

func TestRunProgress(t *testing.T) {
	p := newRunProgress(run.Stats{RowsRead: 250, Total: 1000, Duration: 5 * time.Second, Retries: 2})
	if p.RowsTotal != 1000 || p.Retries != 2 || p.Percent == nil || *p.Percent != 25 || p.ETASeconds == nil || *p.ETASeconds != 15 {
		t.Fatalf("progress %+v", p)
	}
	// No total from the source: no percent, no ETA.
	if p := newRunProgress(run.Stats{RowsRead: 250, Duration: time.Second}); p.Percent != nil || p.ETASeconds != nil {
		t.Errorf("without a total: %+v", p)
	}
}
