package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Targets from issue 32's benchmark section.
const (
	maxMirrorRatio = 0.25 // second Mirror run's wall ≤ this × a full re-read
)

// The line cmd/tributary/syncmirror.go prints under a Mirror run's summary.
var mirrorRE = regexp.MustCompile(`^mirror \S+: (\d+) inserted, (\d+) updated, (\d+) deleted, (\d+) unchanged`)

type mirrorCounts struct{ inserted, updated, deleted, unchanged int64 }

// runMirrorMode (-mirror) measures a Mirror import of the event table
// (n rows): a first run into a fresh store, then 1 % of the rows updated
// and 0.1 % deleted, then the second run — the one measured — against a
// full re-read of the same table (a time_based sync into a fresh store)
// and psql's \copy of it to /dev/null, all in the same run. The second
// run reads the Postgres change feed (logical replication) when the
// server's wal_level is logical, else it diffs the whole table by key.
func runMirrorMode(ctx context.Context, o options, bin string, db *benchDB, dir, cfgPath, fullImport string) error {
	n := o.sizes[len(o.sizes)-1]
	fmt.Printf("filling the table to %d rows...\n", n)
	if err := db.fillTo(ctx, n); err != nil {
		return err
	}
	var walLevel string
	if err := db.conn.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		return err
	}
	imp := filepath.Join(dir, "syncbench-mirror.yaml")
	// The import id names the replication slot, which is the cluster's:
	// one per benchmark database, so that two benchmarks on one server do
	// not take each other's slot (a feed's start drops a slot of its name).
	id := "syncbench-mirror-" + strings.TrimPrefix(db.name, "tributary_syncbench_")
	if err := os.WriteFile(imp, []byte(mirrorImportDoc(id, "events")), 0o600); err != nil {
		return err
	}
	data := filepath.Join(dir, "data-mirror")
	fmt.Printf("first Mirror run (%d inserts)...\n", n)
	first, c, err := runMirrorSync(bin, cfgPath, imp, db.dsn, data, true)
	if err != nil {
		return err
	}
	if c != (mirrorCounts{inserted: n}) {
		return fmt.Errorf("first Mirror run: %+v, want %d inserts", c, n)
	}

	// Disjoint sets: ids ending in 07 are updated, ids ending in 003 deleted.
	var before float64
	if err := db.conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')").Scan(&before); err != nil {
		return err
	}
	tag, err := db.conn.Exec(ctx, `UPDATE events SET note = 'changed ' || id, amount = coalesce(amount, 0) + 1 WHERE id % 100 = 7`)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	upd := tag.RowsAffected()
	if tag, err = db.conn.Exec(ctx, `DELETE FROM events WHERE id % 1000 = 3`); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	del := tag.RowsAffected()
	if _, err := db.conn.Exec(ctx, "VACUUM ANALYZE events"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	left := n - del
	// The WAL the second run's feed must decode: all the cluster wrote
	// since the slot's restart point (the first run's start), of which
	// this table's changes are a part.
	var ownWAL, slotWAL float64
	if err := db.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') - $1::float8,
		coalesce(max(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)), 0)
		FROM pg_replication_slots WHERE database = current_database()`, before).Scan(&ownWAL, &slotWAL); err != nil {
		return err
	}
	fmt.Printf("updated %d rows, deleted %d; second Mirror run...\n", upd, del)
	second, c, err := runMirrorSync(bin, cfgPath, imp, db.dsn, data, false)
	if err != nil {
		return err
	}
	if c.inserted != 0 || c.updated != upd || c.deleted != del {
		return fmt.Errorf("second Mirror run: %+v, want %d updated and %d deleted", c, upd, del)
	}

	fmt.Printf("full re-read (time_based sync of %d rows into a fresh store)...\n", left)
	full, err := runSync(bin, cfgPath, fullImport, db.dsn, filepath.Join(dir, "data-full"))
	if err != nil {
		return err
	}
	if err := checkCounts(full, left); err != nil {
		return err
	}
	copyWall, err := psqlCopy(ctx, db.dsn)
	if err != nil {
		return err
	}

	fmt.Println()
	fmt.Printf("Mirror, Postgres → embedded store (%d rows, 12 columns, %d updated, %d deleted, wal_level %s, %d cores)\n",
		n, upd, del, walLevel, runtime.NumCPU())
	ratio := second.wall.Seconds() / full.wall.Seconds()
	rss := float64(second.peakRSSKiB) / kibPerMiB
	fmt.Printf("  first Mirror run   %s wall, peak RSS %.0f MiB\n", first.wall.Round(10*time.Millisecond), float64(first.peakRSSKiB)/kibPerMiB)
	fmt.Printf("  second Mirror run  %s wall, peak RSS %.0f MiB, %.2f CPU cores\n", second.wall.Round(10*time.Millisecond), rss, second.cpu.Seconds()/second.wall.Seconds())
	fmt.Printf("  full re-read       %s wall, peak RSS %.0f MiB\n", full.wall.Round(10*time.Millisecond), full.rssMiB())
	fmt.Printf("  psql \\copy         %s wall\n", copyWall.Round(10*time.Millisecond))
	fmt.Printf("  second run / full re-read %.3f, second run / \\copy %.2f\n", ratio, second.wall.Seconds()/copyWall.Seconds())
	// The second run's wall time includes the server decoding all the
	// WAL written since the first run began (of every database of the
	// cluster, on a shared machine much more than this table's changes);
	// its CPU time is the process's own work.
	fmt.Printf("  second run / full re-read, CPU time (user + system): %.3f\n", second.cpu.Seconds()/full.cpu.Seconds())
	fmt.Printf("  WAL behind the slot at the second run: %.0f MiB, of which the updates and deletes: %.0f MiB\n",
		slotWAL/(1<<20), ownWAL/(1<<20))
	var missed []string
	if ratio > maxMirrorRatio {
		missed = append(missed, fmt.Sprintf("second run / full re-read %.3f > %.2f", ratio, maxMirrorRatio))
	}
	if rss > maxMirrorRSSMiB {
		missed = append(missed, fmt.Sprintf("peak RSS %.0f MiB > %d MiB", rss, maxMirrorRSSMiB))
	}
	target := fmt.Sprintf("targets: second run ≤ %.2f × full re-read, peak RSS ≤ %d MiB (300 MB)", maxMirrorRatio, maxMirrorRSSMiB)
	if len(missed) == 0 {
		fmt.Printf("TARGET MET (%s)\n", target)
	} else {
		fmt.Printf("TARGET MISSED (%s): %s\n", target, strings.Join(missed, "; "))
	}
	return nil
}

func (r *syncResult) rssMiB() float64 { return float64(r.peakRSSKiB) / kibPerMiB }

// runMirrorSync runs one Mirror sync (fresh: on an emptied data
// directory) and returns its figures and counts.
func runMirrorSync(bin, cfgPath, importPath, dsn, dataDir string, fresh bool) (*syncResult, mirrorCounts, error) {
	var c mirrorCounts
	if fresh {
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, c, err
		}
	}
	cmd := exec.Command(bin, "sync", "-c", importPath, "--config", cfgPath, "--data-dir", dataDir, "--quiet")
	cmd.Env = append(os.Environ(), dsnEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	out, runErr := cmd.Output()
	r := &syncResult{wall: time.Since(start)}
	os.Stdout.Write(out)
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.peakRSSKiB = ru.Maxrss
		}
		r.cpu = ps.UserTime() + ps.SystemTime()
	}
	if runErr != nil {
		return r, c, fmt.Errorf("%s sync: %w", bin, runErr)
	}
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if m := mirrorRE.FindStringSubmatch(line); m != nil {
			found = true
			for i, p := range []*int64{&c.inserted, &c.updated, &c.deleted, &c.unchanged} {
				*p, _ = strconv.ParseInt(m[1+i], 10, 64)
			}
		}
	}
	if !found {
		return r, c, fmt.Errorf("%s sync printed no mirror counts", bin)
	}
	return r, c, nil
}

// psqlCopy times `psql -c "\copy (SELECT * FROM events) TO '/dev/null'"`:
// the client-side export a user would compare with.
func psqlCopy(ctx context.Context, dsn string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "psql", "-X", "-q", "-d", dsn, "-c", `\copy (SELECT * FROM events) TO '/dev/null'`)
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("psql \\copy (is psql installed?): %w", err)
	}
	return time.Since(start), nil
}

// mirrorImportDoc is a Mirror import of public.table keyed by its
// primary key (id); the events' $insert_id derives from the key.
func mirrorImportDoc(id, table string) string {
	return fmt.Sprintf(`id: %s
project_id: 1
import_type: event_stream
sync_mode: mirror
source: {kind: postgres, dsn: "${%s}"}
table_params: {table: public.%s}
event_column_name: event_type
time_column_name: event_time
user_column_name: user_id
device_column_name: device_id
json_properties_column_name: props
schedule: api
`, id, dsnEnv, table)
}
