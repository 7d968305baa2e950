package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/migrate/amplitude"
)

const migrateUsage = "usage: tributary migrate amplitude --api-key KEY --api-secret SECRET --token TOKEN [--start YYYY-MM-DD] [--end YYYY-MM-DD] [--dry-run] [--region EU] [--config FILE] [--data-dir DIR]"

// migrateCmd runs an Amplitude migration in the foreground, on the data
// directory itself (the server must not be running), with a progress
// line. Interrupted (Ctrl-C), it stops at a checkpoint; the same command
// again resumes the job.
func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "amplitude" {
		return errors.New(migrateUsage)
	}
	fs := flag.NewFlagSet("migrate amplitude", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "configs/tributary.yaml", "server config (projects, region)")
	dataDir := fs.String("data-dir", "", "data directory (overrides the config's data_dir)")
	key := fs.String("api-key", "", "Amplitude project API key (default $AMPLITUDE_API_KEY)")
	secret := fs.String("api-secret", "", "Amplitude secret key (default $AMPLITUDE_API_SECRET; prefer the variable, flags show in ps)")
	token := fs.String("token", "", "token of the target project")
	start := fs.String("start", "", "first day, YYYY-MM-DD (UTC); neither date: the last 30 days")
	end := fs.String("end", "", "last day, YYYY-MM-DD, inclusive")
	dry := fs.Bool("dry-run", false, "count the events and users that would be migrated; migrate nothing")
	region := fs.String("region", "", "EU: Amplitude's EU host, for a project enrolled in EU residency")
	baseURL := fs.String("amplitude-url", "", "Amplitude API base URL (proxies, tests); default by region")
	quiet := fs.Bool("quiet", false, "no progress line")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New(migrateUsage)
	}
	req := amplitude.Request{
		Credentials: amplitude.Credentials{APIKey: orEnv(*key, "AMPLITUDE_API_KEY"), APISecret: orEnv(*secret, "AMPLITUDE_API_SECRET")},
		Token:       *token, StartDate: *start, EndDate: *end, DryRun: *dry, Region: *region,
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, st, release, err := openDataDir(ctx, *cfgPath, *dataDir, log, storeTuning{})
	if err != nil {
		return err
	}
	defer release()
	jobs, err := amplitude.NewFileJobStore(filepath.Join(cfg.DataDir, "migrations"))
	if err != nil {
		return err
	}
	credKey, err := migrateKey()
	if err != nil {
		return err
	}
	svc, err := amplitude.New(amplitude.Config{
		Store: st, Jobs: jobs, Projects: auth.New(cfg, time.Now), Region: cfg.Region, Logger: log,
		CredentialKey: credKey, BaseURL: *baseURL, EUBaseURL: *baseURL,
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	bar := &migrateBar{w: stderr, quiet: *quiet, began: time.Now()}
	if *dry {
		res, err := svc.DryRun(ctx, req, func(r amplitude.DryRunResult) {
			bar.draw(r.HoursDone, r.HoursTotal, r.EventsExported, r.EventsFailed, "")
		})
		bar.finish()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dry run, project %d, %s to %s: %d events would be migrated (%d distinct users), %d exported, %d fail /import's rules\n",
			res.ProjectID, res.StartDate, res.EndDate, res.Events, res.DistinctUsers, res.EventsExported, res.EventsFailed)
		printFailures(stdout, res.Failures)
		return nil
	}
	s, err := svc.Submit(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "job %s: project %d, hours %s to %s\n", s.ID, s.ProjectID, s.StartDate, s.EndDate)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = svc.Wait(ctx, s.ID)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-ctx.Done():
			svc.Close() // stops at the last checkpoint
			bar.finish()
			return fmt.Errorf("job %s interrupted; run the same command again to resume it", s.ID)
		case <-tick.C:
			if cur, err := svc.Status(ctx, s.ID); err == nil {
				bar.draw(cur.HoursDone, cur.HoursTotal, cur.EventsExported, cur.EventsFailed, string(cur.State))
			}
		}
	}
	bar.finish()
	if s, err = svc.Status(context.WithoutCancel(ctx), s.ID); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "job %s %s: %d/%d hours, %d events exported, %d imported (%d already there), %d failed, %d profiles updated, in %s\n",
		s.ID, s.State, s.HoursDone, s.HoursTotal, s.EventsExported, s.EventsImported, s.EventsDuplicate, s.EventsFailed,
		s.ProfilesUpdated, (time.Duration(s.ElapsedSeconds * float64(time.Second))).Round(time.Millisecond))
	printFailures(stdout, s.Failures)
	if s.State != amplitude.Succeeded {
		return fmt.Errorf("job %s %s: %s", s.ID, s.State, s.Error)
	}
	return nil
}

func orEnv(v, name string) string {
	if v != "" {
		return v
	}
	return os.Getenv(name)
}

// migrateKey reads the optional credential key that lets an interrupted
// migration resume without its credentials being given again.
func migrateKey() ([]byte, error) {
	v := os.Getenv("TRIBUTARY_MIGRATE_KEY")
	if v == "" {
		return nil, nil
	}
	k, err := amplitude.ParseKey(v)
	if err != nil {
		return nil, fmt.Errorf("TRIBUTARY_MIGRATE_KEY: %w", err)
	}
	return k, nil
}

func printFailures(w io.Writer, fs []amplitude.Failure) {
	for i, f := range fs {
		if i == 5 {
			fmt.Fprintf(w, "  … %d more in the job status\n", len(fs)-5)
			return
		}
		fmt.Fprintf(w, "  %s line %d: %s: %s\n", f.File, f.Line, f.Field, f.Message)
	}
}

// migrateBar redraws one line at most every 200ms: hours done of total,
// events, rate, elapsed.
type migrateBar struct {
	w       io.Writer
	quiet   bool
	began   time.Time
	drawn   bool
	lastRun time.Time
}

func (p *migrateBar) draw(done, total int, events, failed int64, state string) {
	if p.quiet || time.Since(p.lastRun) < 200*time.Millisecond {
		return
	}
	p.lastRun = time.Now()
	const width = 24
	pct := 0.0
	if total > 0 {
		pct = float64(done) * 100 / float64(total)
	}
	fill := int(pct / 100 * width)
	el := time.Since(p.began)
	line := fmt.Sprintf("[%s%s] %5.1f%% %d/%d hours, %d events (%.0f/s)", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), pct, done, total, events, float64(events)/max(el.Seconds(), 0.001))
	if failed > 0 {
		line += fmt.Sprintf(", %d failed", failed)
	}
	if state != "" {
		line += ", " + state
	}
	fmt.Fprintf(p.w, "\r\033[K%s, %s elapsed", line, el.Round(time.Second))
	p.drawn = true
}

func (p *migrateBar) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
