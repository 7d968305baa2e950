package integration

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// OAuth tokens and rate limits hold across processes on one PostgreSQL
// store: they live in the database, not in one process's memory.

// A token process A issued is accepted by process B, and B still refuses
// a token nobody issued.
func TestPGOAuthTokenAcrossProcesses(t *testing.T) {
	st := newPGDB(t)
	cfg := defaultConfig()
	cfg.Store = storeURL(t, st)
	servers := startCluster(t, 2, cfg)
	a, b := servers[0], servers[1]
	bearer := bearerAuth(a.token(t, ownerSA, ownerSecret).AccessToken)
	wantImported(t, b.importEvents(t, bearer, projectQ(mainID), events("oauth-shared", 5)), 5)
	if got := b.export(t, bearer, mainID, nil); len(got) != 5 {
		t.Fatalf("export on B with A's token: %d events, want 5", len(got))
	}
	wantError(t, b.importEvents(t, bearerAuth("trb_0000"), projectQ(mainID), events("oauth-shared", 1)),
		http.StatusUnauthorized, "Unauthorized")
	// Only a hash is stored, never the token itself.
	var n int
	if err := st.conn.QueryRow(context.Background(), `SELECT count(*) FROM oauth_tokens WHERE length(hash) = 32`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("oauth_tokens: %d rows of a 32-byte hash (%v), want 1", n, err)
	}
}

// A project's bytes_per_minute is one budget for all processes: two
// processes, each offered far more than the budget, accept together at
// most the budget plus one reservation chunk per process (the limiter
// reserves 1/32 of the budget at a time).
func TestPGRateLimitAcrossProcesses(t *testing.T) {
	const (
		sharedID     = 9
		sharedSecret = "shared-secret-0009"
		budget       = 32 << 10
		chunk        = budget / 32
	)
	st := newPGDB(t)
	cfg := defaultConfig()
	cfg.Store = storeURL(t, st)
	cfg.Projects = append(cfg.Projects, projectConfig{ID: sharedID, Name: "Shared", Token: "shared-token-0009",
		APISecret: sharedSecret, Region: "us", IDManagement: "simplified",
		RateLimit: &rateLimitConfig{BytesPerMinute: budget}})
	servers := startCluster(t, 2, cfg)
	auth := basicAuth(sharedSecret, "")

	// The shared budget is per calendar minute: start in its first 20s so
	// the burst (~0.4s idle) has ≥39s to finish in it on a loaded machine.
	if now := time.Now(); now.Second() > 20 {
		time.Sleep(time.Until(now.Truncate(time.Minute).Add(time.Minute + 500*time.Millisecond)))
	}
	burst := time.Now()
	minute := burst.Unix() / 60
	var (
		mu                 sync.Mutex
		accepted, refused  int
		acceptedN, offered int64
	)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 { // 4 × 200 bodies of about 134 bytes: over three budgets
				s := servers[(w+i)%2]
				body := mustJSON(t, events("shared-limit", 1))
				r, err := s.try(request{Path: "/import", Auth: auth, Body: body})
				if err != nil {
					t.Errorf("import: %v", err)
					return
				}
				mu.Lock()
				offered += int64(len(body))
				switch r.Status {
				case http.StatusOK:
					accepted++
					acceptedN += int64(len(body))
				case http.StatusTooManyRequests:
					// As on one process: a JSON error body.
					if !strings.Contains(string(r.Body), `"code":429`) || !strings.Contains(string(r.Body), "rate limit") {
						t.Errorf("429 body %s", r.Body)
					}
					refused++
				default:
					t.Errorf("import: want 200 or 429, got %s", r)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if now := time.Now().Unix() / 60; now != minute {
		t.Fatalf("the burst crossed a minute boundary (%d → %d); the shared budget restarted", minute, now)
	}
	t.Logf("offered %d bytes, accepted %d bytes in %d requests, refused %d, in %v", offered, acceptedN, accepted, refused, time.Since(burst))
	if acceptedN > budget+2*chunk {
		t.Fatalf("two processes accepted %d bytes, budget %d + 2 chunks of %d", acceptedN, budget, chunk)
	}
	if acceptedN < budget/2 || refused == 0 {
		t.Fatalf("accepted %d bytes, refused %d requests: the budget of %d was not used", acceptedN, refused, budget)
	}
	var stored int
	if err := st.conn.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE project = $1`, sharedID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != accepted {
		t.Fatalf("store holds %d events of the project, %d were acknowledged", stored, accepted)
	}
}
