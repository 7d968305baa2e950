package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tributary-dev/tributary/engine/importspec"
	syncrun "github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/scheduler"
	"github.com/tributary-dev/tributary/server"
)

// storeTuning adapts the store to the command that opens it.
type storeTuning struct {
	threads int // DuckDB threads; 0: one per core
	// memoryLimit is the memory_limit (the process's memory budget,
	// server.NewMemoryBudget) when the config sets none; "": none.
	memoryLimit string
	// split divides the budget (server.NewMemoryBudget when nil).
	split func(total int64) server.MemoryBudget
}

// syncTuning is `tributary sync`'s, a one-shot run that only writes: a
// small budget (first 128MB, an eighth to DuckDB: syncbench, 1M rows of 12
// columns, peak RSS 671 → 262 MiB with dedup_keys memory, 679 → 253 MiB
// with disk, the rate unchanged within the noise; now 160MB split by
// server.NewSyncBudget), and one DuckDB thread for the background loader
// as in `serve`, the other core mapping and validating (measured: 5-15%
// faster than one thread per core).
func syncTuning() storeTuning {
	return storeTuning{threads: 1, memoryLimit: "160MB", split: server.NewSyncBudget}
}

// openDataDir loads the server config and opens its store for a command
// that works on the data directory itself (the server must not be running:
// the embedded store is one process's). The Go share of memory_limit
// holds from before the open (which loads the dedup keys) to the end of
// release, which closes the store (draining its loader) and lifts it.
func openDataDir(ctx context.Context, cfgPath, dataDir string, log *slog.Logger, tune storeTuning) (cfg *config.Config, st store.Store, release func(), err error) {
	if cfg, err = config.Load(cfgPath); err != nil {
		return nil, nil, nil, err
	}
	if dataDir != "" {
		cfg.DataDir = dataDir
	}
	if cfg.MemoryLimit == "" {
		cfg.MemoryLimit = tune.memoryLimit
	}
	split := tune.split
	if split == nil {
		split = server.NewMemoryBudget
	}
	budget := split(cfg.MemoryBudget())
	unlimit := server.LimitGoHeap(budget, log)
	if st, err = server.OpenStore(ctx, cfg, log, tune.threads, budget); err != nil {
		unlimit()
		return nil, nil, nil, fmt.Errorf("%w (is `tributary serve` running on %s? use the manual-sync API instead)", err, cfg.DataDir)
	}
	return cfg, st, func() { _ = st.Close(); unlimit() }, nil
}

// syncCmd runs one import once in the foreground with a progress line.
func syncCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, fl, cfgPath := flagSet("sync", stderr)
	full := fs.Bool("full", false, "ignore the watermark and re-read the whole table (dedup absorbs rows read before)")
	dataDir := fs.String("data-dir", "", "data directory (overrides the config's data_dir)")
	quiet := fs.Bool("quiet", false, "no progress line")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (loopback only; for profiling)")
	alertWait := fs.Duration("alert-wait", defaultAlertWait, "how long to deliver the alerts the run raised before exiting (0: leave them in the outbox for the next sync or serve)")
	resume := fs.Bool("resume", false, "resume an import a monitoring rule paused (accepting the volume that paused it), then run it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	paths := append(*fl, fs.Args()...)
	if len(paths) != 1 {
		return errors.New("sync: give one import file with -c FILE")
	}
	if *alertWait < 0 {
		return errors.New("sync: --alert-wait must not be negative")
	}
	env, err := loadImportEnv(*cfgPath, true, nil)
	if err != nil {
		return err
	}
	im, err := env.loader.File(paths[0])
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *pprofAddr != "" {
		if err := startPprof(*pprofAddr, log); err != nil {
			return err
		}
	}
	tune := syncTuning()
	if im.IsMirror() {
		tune.split = server.NewMirrorSyncBudget
	}
	cfg, st, release, err := openDataDir(ctx, *cfgPath, *dataDir, log, tune)
	if err != nil {
		return err
	}
	defer release()
	// Sources open under the server's limits, its data dir (as given
	// here) included.
	reg, err := server.SourceRegistry(cfg, log)
	if err != nil {
		return err
	}
	projects := server.ProjectLookup(cfg)
	if err := im.Check(server.ImportRules(cfg)); err != nil {
		return err
	}
	project, _ := projects(im.ProjectID)
	// The catalog knows the import so that a volume rule can pause it
	// (and --resume resume it) as the app API would.
	cat, err := scheduler.NewCatalog(ctx, scheduler.CatalogOptions{Store: st, Registry: reg, Projects: projects,
		Files: []*importspec.Import{im}, Connections: env.loader.Connections, MinInterval: time.Duration(cfg.MinScheduleInterval), Log: log,
		ConnectionKey: cfg.ConnectionKeyBytes(), HostAllowed: cfg.HostAllowed})
	if err != nil {
		return err
	}
	if err := resumeOrRefuse(ctx, cat, im, *resume, stdout); err != nil {
		return err
	}
	al := newSyncAlerts(cfg, st, cat, log)
	sched := scheduler.New(cat, scheduler.Options{Runner: &syncrun.Runner{Registry: reg, Store: st, Log: log, OneOff: true}, Store: st, Log: log,
		Monitor: al.monitor()})
	// Stopped before the store closes (defers run last-in first-out): the
	// lease renewal loop would otherwise tick into a closing store.
	defer func() { _ = sched.Stop(context.WithoutCancel(ctx)) }()
	bar := &progressBar{w: stderr}
	// Without a bar nothing shows an ETA, so the source is not asked to
	// count the rows first: on Postgres that is a scan of the whole
	// selection (0.5 s for 5 M rows) before the first row is read.
	var progress func(syncrun.Stats)
	if !*quiet {
		progress = bar.update
	}
	r, err := sched.RunForeground(ctx, scheduler.Entry{Import: im, Project: project, Origin: scheduler.OriginFile}, scheduler.TriggerCLI, *full, progress)
	if err != nil {
		return err
	}
	bar.finish()
	// Before the result is told: a failed run's alert goes out (or
	// waits in the outbox) whatever the exit status.
	al.finish(ctx, im, *alertWait, stderr)
	dur := time.Duration(r.EndedMs-r.StartedMs) * time.Millisecond
	fmt.Fprintf(stdout, "run %s %s: %d rows read, %d imported, %d duplicates, %d failed, %s in %s (%.0f rows/s)\n",
		r.ID, r.Status, r.RowsRead, r.Imported, r.Duplicate, r.Failed, bytesText(r.Bytes), dur.Round(time.Millisecond), rate(r.RowsRead, dur))
	failures, retries := scheduler.SplitFailures(r.Failures)
	for _, rt := range retries {
		fmt.Fprintf(stdout, "retried at %s: %s\n", time.Unix(rt.At, 0).UTC().Format(time.RFC3339), rt.Error)
	}
	if r.Failed > 0 {
		fmt.Fprintf(stdout, "first failures: %s\n", failures)
	}
	printMirrorCounts(ctx, stdout, st, r)
	if r.Status != store.RunSucceeded {
		return fmt.Errorf("run %s %s: %s", r.ID, r.Status, r.Reason)
	}
	return nil
}

// resumeOrRefuse applies --resume, or refuses to run an import a
// monitoring rule paused: its reason says what it saw, and running it
// would import (or delete) what the rule held back.
func resumeOrRefuse(ctx context.Context, cat *scheduler.Catalog, im *importspec.Import, resume bool, stdout io.Writer) error {
	e, ok := cat.Get(im.ProjectID, im.ID)
	if !ok || !e.Import.Paused || e.PausedReason == "" {
		return nil
	}
	if !resume {
		return fmt.Errorf("import %s is paused: %s (run `tributary sync --resume` to accept and run it)", im.ID, e.PausedReason)
	}
	paused := false
	if _, err := cat.Patch(ctx, im.ProjectID, im.ID, &paused, nil); err != nil {
		return fmt.Errorf("resuming import %s: %w", im.ID, err)
	}
	fmt.Fprintf(stdout, "import %s resumed (was: %s)\n", im.ID, e.PausedReason)
	return nil
}

func rate(rows int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(rows) / d.Seconds()
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// progressBar redraws one line at most every 200ms: rows, percent and ETA
// when the source told the row count, rate, elapsed.
type progressBar struct {
	w     io.Writer
	last  time.Time
	drawn bool
}

func (p *progressBar) update(st syncrun.Stats) {
	if time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	line := fmt.Sprintf("%d rows", st.RowsRead)
	r := st.Rate()
	if st.Total > 0 {
		pct := min(100, float64(st.RowsRead)*100/float64(st.Total))
		const width = 24
		fill := int(pct / 100 * width)
		line = fmt.Sprintf("[%s%s] %5.1f%% %d/%d rows", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), pct, st.RowsRead, st.Total)
		if r > 0 && st.Total > st.RowsRead {
			line += fmt.Sprintf(", ETA %s", (time.Duration(float64(st.Total-st.RowsRead)/r) * time.Second).Round(time.Second))
		}
	}
	line += fmt.Sprintf(", %.0f rows/s, %s elapsed", r, st.Duration.Round(time.Second))
	if st.Failed > 0 {
		line += fmt.Sprintf(", %d failed", st.Failed)
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	p.drawn = true
}

func (p *progressBar) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// runsCmd lists sync history.
func runsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "configs/tributary.yaml", "server config")
	dataDir := fs.String("data-dir", "", "data directory (overrides the config's data_dir)")
	importID := fs.String("import", "", "only this import")
	project := fs.Int64("project", 0, "project id (default: every project of the config)")
	limit := fs.Int("limit", 30, "runs per project")
	key := fs.String("key", "", "one source row's outcome run by run, from the ledger (needs --import)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key != "" && *importID == "" {
		return fmt.Errorf("runs --key: --import names the import the key belongs to")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, st, release, err := openDataDir(ctx, *cfgPath, *dataDir, log, storeTuning{})
	if err != nil {
		return err
	}
	defer release()
	if *key != "" {
		return runsKey(ctx, st, cfg, *project, *importID, *key, *limit, stdout)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tIMPORT\tRUN\tTRIGGER\tSTATUS\tSTARTED\tDURATION\tROWS\tIMPORTED\tFAILED\tREASON\tCHANGES")
	for _, p := range cfg.Projects {
		if *project != 0 && p.ID != *project {
			continue
		}
		runs, err := st.Runs(ctx, store.RunFilter{Project: p.ID, Import: *importID, Limit: *limit})
		if err != nil {
			return err
		}
		changes := mirrorChanges(ctx, st, p.ID, runs)
		for _, r := range runs {
			dur := "-"
			if r.EndedMs > 0 {
				dur = (time.Duration(r.EndedMs-r.StartedMs) * time.Millisecond).Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.Project, r.Import, r.ID, r.Trigger, r.Status,
				time.UnixMilli(r.StartedMs).UTC().Format(time.RFC3339), dur, r.RowsRead, r.Imported, r.Failed, r.Reason, changes[r.ID])
		}
	}
	return tw.Flush()
}
