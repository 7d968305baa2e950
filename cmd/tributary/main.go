// Command tributary is the Tributary server and its tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tributary-dev/tributary/connectors/duckdb"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/server"
)

const usage = `usage: tributary <command> [flags]

commands:
  serve --config FILE [--listen ADDR] [--data-dir DIR]   run the ingestion server
  demo-warehouse PATH                                     create the demo DuckDB warehouse (if missing)
  validate -c IMPORT.yaml [-c …] [--config FILE]          check import files without connecting
  preview -c IMPORT.yaml [--config FILE] [--limit 20] [--format table|ndjson]
                                                          map a sample of the table; writes nothing
  sources test -c IMPORT.yaml                             check the source: connect, describe, read a row
  migrate amplitude --api-key K --api-secret S --token T [--start D --end D] [--dry-run] [--region EU]
                                                          copy Amplitude history into a project (foreground)
  sync -c IMPORT.yaml [--full] [--config FILE] [--alert-wait 5s] [--resume]
                                                          run one import once in the foreground (server stopped);
                                                          raises and delivers the project's alerts
  runs [--import ID] [--project N] [--config FILE]        list sync history
`

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tributary:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "demo-warehouse":
		if len(args) != 2 {
			return errors.New("usage: tributary demo-warehouse PATH")
		}
		if err := os.MkdirAll(filepath.Dir(args[1]), 0o755); err != nil {
			return err
		}
		created, err := duckdb.SeedDemo(context.Background(), args[1])
		if err == nil && created {
			fmt.Fprintf(stderr, "demo warehouse created at %s\n", args[1])
		}
		return err
	case "validate":
		return validate(args[1:], os.Stdout, stderr)
	case "preview":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return previewCmd(ctx, args[1:], os.Stdout, stderr)
	case "sources":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return sourcesTest(ctx, args[1:], os.Stdout, stderr)
	case "sync":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return syncCmd(ctx, args[1:], os.Stdout, stderr)
	case "migrate":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return migrateCmd(ctx, args[1:], os.Stdout, stderr)
	case "runs":
		return runsCmd(context.Background(), args[1:], os.Stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stderr, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func serve(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "configs/tributary.yaml", "YAML configuration file")
	listen := fs.String("listen", "", "listen address host:port (overrides the file's listen)")
	dataDir := fs.String("data-dir", "", "data directory (overrides the file's data_dir)")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (loopback only; for profiling)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	log := newLogger(cfg, stderr)
	if *pprofAddr != "" {
		if err := startPprof(*pprofAddr, log); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return server.Run(ctx, cfg, log, func(addr string) {
		// A machine-readable line for scripts and tests that start us on port 0.
		fmt.Fprintf(os.Stdout, "listening on %s\n", addr)
	})
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel)))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
