package amplitude

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// profileWriter records the profile batches written; it refuses the user
// named reject and fails the write numbered failAt (1-based, 0: never).
type profileWriter struct {
	reject string
	failAt int
	writes [][]string
}

func (w *profileWriter) Write(_ context.Context, batches []store.Batch) (store.WriteResult, error) {
	if len(w.writes)+1 == w.failAt {
		return store.WriteResult{}, errors.New("disk full")
	}
	var res store.WriteResult
	var users []string
	for _, b := range batches {
		for _, p := range b.Profiles {
			users = append(users, p.DistinctID)
			if p.DistinctID == w.reject {
				res.Rejected = append(res.Rejected, store.Rejection{Ref: p.Ref, Err: errors.New("at its property limit")})
				continue
			}
			res.Profiles++
		}
	}
	w.writes = append(w.writes, users)
	return res, nil
}

// The profiles are parsed one batch ahead of the writes: every user is
// written once, in merge order, profileBatch to a write, and failures
// (refused by the parser or by the store) are counted as a serial load
// counts them.
func TestLoadProfilesPipelined(t *testing.T) {
	dir := t.TempDir()
	const users = 2*profileBatch + 500
	var runs []profileRun
	for r := range 2 { // two runs, merged: each user's later event wins
		run := profileRun{Name: fmt.Sprintf("run-%d.bin", r), Users: users}
		err := writeRun(filepath.Join(dir, run.Name), func(w *runWriter) error {
			for u := range users {
				props := fmt.Sprintf(`{"plan":"p%d"}`, r)
				if u == 7 {
					props = `{"":1}` // refused by the parser: an empty name
				}
				w.add(fmt.Appendf(nil, "user-%05d", u), int64(1709287200000+r), []byte(fmt.Sprint(r)), []byte(props))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for _, tc := range []struct {
		name   string
		failAt int
	}{{"ok", 0}, {"second write fails", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &profileWriter{reject: "user-01500", failAt: tc.failAt}
			s := &Service{cfg: Config{Store: w}}
			jr := &jobRun{job: &Job{}}
			err := s.loadProfiles(context.Background(), jr, dir, runs, 1)
			if tc.failAt > 0 {
				if err == nil || !strings.Contains(err.Error(), "disk full") || len(w.writes) != 1 {
					t.Fatalf("err %v after %d writes", err, len(w.writes))
				}
				if jr.job.ProfilesUpdated != 0 {
					t.Fatalf("a failed load counted: %+v", jr.job.Counts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(w.writes) != 3 || len(w.writes[0]) != profileBatch || len(w.writes[2]) != users-1-2*profileBatch {
				sizes := []int{}
				for _, b := range w.writes {
					sizes = append(sizes, len(b))
				}
				t.Fatalf("writes of %v users; counts %+v", sizes, jr.job.Counts)
			}
			n := 0
			for _, batch := range w.writes {
				for _, u := range batch {
					if n == 7 {
						n++ // the refused one is never written
					}
					if want := fmt.Sprintf("user-%05d", n); u != want {
						t.Fatalf("wrote %s, want %s", u, want)
					}
					n++
				}
			}
			c := jr.job.Counts
			if c.ProfilesUpdated != users-2 || c.ProfilesFailed != 2 || len(c.Failures) != 2 ||
				!strings.Contains(c.Failures[0].Message, "user-00007") || !strings.Contains(c.Failures[1].Message, "user-01500: at its property limit") {
				t.Fatalf("counts %+v", c)
			}
		})
	}
}
