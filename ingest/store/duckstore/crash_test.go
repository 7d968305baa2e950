package duckstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// Environment of the child process of TestKillNineLosesNothing.
const (
	crashEnvPath  = "DUCKSTORE_CRASH_CHILD_PATH"
	crashEnvFirst = "DUCKSTORE_CRASH_CHILD_FIRST"
	crashEnvSmall = "DUCKSTORE_CRASH_CHILD_SMALL_KEYS"
)

// smallKeys are dedup tiers that spill every 2,000 keys and merge often,
// so a child killed after a few thousand events leaves checkpoints.
var smallKeys = keysConfig{recentCap: 2000, maxRuns: 3, maxTombs: 1000, stallRuns: 8, loadRunKeys: 4000}

const (
	crashWriters   = 4
	crashBatchSize = 500 // events with insert id per batch, plus one without
)

// crashBatch is batch number i: its insert ids are derived from i, and it
// carries one event without insert id so partial batches would show.
func crashBatch(i int) store.Batch {
	evs := storetest.GenEvents(1, crashBatchSize, int64(i)*10_000)
	evs = append(evs, storetest.NewEvent(1, "anon", fmt.Sprintf("batch-%d", i), int64(i)*10_000, "", `{}`))
	return store.Batch{Project: 1, Events: evs, Common: crashCommon(i)}
}

// crashCommon is batch i's common properties: none for even batches, one
// of three objects for odd ones, so replays find and make their rows.
func crashCommon(i int) []byte {
	if i%2 == 0 {
		return nil
	}
	return fmt.Appendf(nil, `{"$source":"crash","run":%d}`, i%3)
}

// TestMain lets the test binary double as the writer process that
// TestKillNineLosesNothing kills, without a skipped placeholder test.
func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnvPath); path != "" {
		crashChild(path)
	}
	os.Exit(m.Run())
}

// crashChild is the writer that TestKillNineLosesNothing kills. Writers
// take batch numbers from a shared counter and print "ACK n" after Write
// returns nil; the parent treats those as acknowledged.
func crashChild(path string) {
	first, _ := strconv.Atoi(os.Getenv(crashEnvFirst))
	opt := Options{}
	if os.Getenv(crashEnvSmall) != "" {
		opt.keys = smallKeys
	}
	s, err := Open(context.Background(), path, opt)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	next := first
	for range crashWriters {
		go func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if _, err := s.Write(context.Background(), []store.Batch{crashBatch(i)}); err != nil {
					fmt.Println("ERR", err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Printf("ACK %d\n", i) // stdout is unbuffered: one write(2) per line
				mu.Unlock()
			}
		}()
	}
	select {} // until killed
}

// TestKillNineLosesNothing kills a writing process with SIGKILL at
// arbitrary moments and checks, after each restart, that every acknowledged
// batch is stored whole, every other batch is whole or absent, and nothing
// is stored twice, including batches a client re-sends after the crash.
func TestKillNineLosesNothing(t *testing.T) { killNine(t, false) }

// TestKillNineKeysCheckpoint is the same with dedup tiers so small that
// the child writes crash checkpoints of its keys: each restart adopts the
// last one and catches up from the table (keyset_checkpoint.go) rather
// than rebuilding, and must be as exact.
func TestKillNineKeysCheckpoint(t *testing.T) { killNine(t, true) }

func killNine(t *testing.T, small bool) {
	path := filepath.Join(t.TempDir(), "crash.duckdb")
	acked := map[int]bool{}
	next := 0
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnvPath+"="+path, crashEnvFirst+"="+strconv.Itoa(next))
		if small {
			cmd.Env = append(cmd.Env, crashEnvSmall+"=1")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := time.Now().Add(time.Duration(300+200*round) * time.Millisecond)
		sc := bufio.NewScanner(out)
		roundAcks := 0
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "ACK "); ok {
				i, _ := strconv.Atoi(n)
				acked[i] = true
				roundAcks++
				next = max(next, i+1)
			} else if strings.HasPrefix(line, "ERR") {
				t.Fatalf("child: %s", line)
			}
			// Small tiers checkpoint after a spill (4 batches) and the next
			// write: wait for a few, or a slow machine kills before any.
			if time.Now().After(killAt) && (roundAcks > 0 && !small || roundAcks >= 12) {
				break
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// The child kept writing until the kill, and the scanner may hold
		// lines it read ahead: take every ACK the child printed, or the
		// next child would reuse batch numbers the store already holds.
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
				i, _ := strconv.Atoi(n)
				acked[i] = true
				roundAcks++
				next = max(next, i+1)
			}
		}
		_ = cmd.Wait()
		// Batches taken but not acknowledged (at most one per writer) may
		// have committed: numbers up to next+crashWriters may exist.
		next += crashWriters

		var m keysManifest
		if small {
			b, err := os.ReadFile(filepath.Join(path+".keys", keysManifestName))
			if err != nil || json.Unmarshal(b, &m) != nil || !m.Checkpoint {
				t.Fatalf("round %d: no crash checkpoint of the dedup keys after %d acknowledged batches: %v", round, roundAcks, err)
			}
		}
		opt := testOptions
		if small {
			opt.keys = smallKeys
		}
		s := openWith(t, path, opt)
		if tk := s.keys.(*tieredKeys); small && tk.ckpt.coveredSeq != m.FromSeq {
			t.Fatalf("round %d: the keys were rebuilt, not adopted from the checkpoint (from seq %d)", round, m.FromSeq)
		}
		verifyCrashState(t, s, acked, next)
		// A client whose request got no answer re-sends it. Its events with
		// insert id must dedup exactly against whatever survived the crash;
		// the one without is sent only if the batch is absent, since those
		// are never deduplicated.
		for i := max(0, next-2*crashWriters); i < next; i++ {
			b := crashBatch(i)
			stored := len(storetest.Collect(t, s, store.Scan{Project: 1, FromMs: int64(i) * 10_000, ToMs: int64(i+1) * 10_000}))
			want := len(b.Events)
			if stored > 0 {
				b.Events = b.Events[:crashBatchSize]
				want = 0
			}
			res, err := s.Write(context.Background(), []store.Batch{b})
			if err != nil {
				t.Fatal(err)
			}
			if res.Inserted != want {
				t.Fatalf("re-sent batch %d (%d events stored before): inserted %d, want %d", i, stored, res.Inserted, want)
			}
			acked[i] = true
		}
		verifyCrashState(t, s, acked, next)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acknowledged in this run, %d batches acknowledged in total", round, roundAcks, len(acked))
	}
}

// verifyCrashState checks whole-or-nothing batches, exact dedup, and that
// every acknowledged batch is present.
func verifyCrashState(t *testing.T, s *Store, acked map[int]bool, limit int) {
	t.Helper()
	perBatch := map[int]int{}
	seen := map[store.Key]bool{}
	err := s.ScanEvents(context.Background(), store.Scan{Project: 1, FromMs: -1 << 62, ToMs: 1 << 62}, func(e *store.Event) error {
		i := int(e.TimeMs / 10_000)
		perBatch[i]++
		if c := crashCommon(i); c == nil && bytes.Contains(e.Props, []byte(`"$source"`)) || c != nil && !bytes.HasSuffix(e.Props, c[1:]) {
			return fmt.Errorf("event %q of batch %d has props %s", e.InsertID, i, e.Props)
		}
		if e.Dedupable() {
			if seen[e.Key] {
				return fmt.Errorf("event %s stored twice", e.InsertID)
			}
			seen[e.Key] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range limit + crashWriters {
		n := perBatch[i]
		if n != 0 && n != crashBatchSize+1 {
			t.Fatalf("batch %d stored partially: %d of %d events", i, n, crashBatchSize+1)
		}
		if acked[i] && n == 0 {
			t.Fatalf("acknowledged batch %d lost", i)
		}
	}
	if s.keys.len() != len(seen) {
		t.Fatalf("dedup set holds %d keys, table %d", s.keys.len(), len(seen))
	}
	// The usage counters ride the same log entries: exactly the stored
	// events, none counted twice by a replay, none lost.
	var stored, counted int64
	for _, n := range perBatch {
		stored += int64(n)
	}
	usage, err := s.Usage(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		counted += u.Events
	}
	if counted != stored {
		t.Fatalf("usage counters say %d events, the table holds %d (%+v)", counted, stored, usage)
	}
}
