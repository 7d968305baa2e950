package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// sourcesTest checks an import's source the way a sync would use it:
// connect, describe the table (columns, nullability, primary key), check
// the columns the import names, and read one row to prove the grants.
func sourcesTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "test" {
		return errors.New("usage: tributary sources test -c IMPORT.yaml")
	}
	fs, fl, cfgPath := flagSet("sources test", stderr)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	paths := append(*fl, fs.Args()...)
	if len(paths) != 1 {
		return errors.New("sources test: give one import file with -c FILE")
	}
	// The server's limits apply (allowed_paths, its own files refused, one
	// read-only SELECT); why a connection failed, which a sync keeps out
	// of the run history, is for the operator running this: stderr.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env, err := loadImportEnv(*cfgPath, explicitFlag(fs, "config"), log)
	if err != nil {
		return err
	}
	reg := env.loader.Registry
	im, err := env.loader.File(paths[0])
	if err != nil {
		return err
	}
	kind := im.SourceConfig().Kind
	step := func(name string, start time.Time, err error) error {
		if err != nil {
			class := "transient: retrying may help"
			if connectors.IsPermanent(err) {
				class = "permanent: fix the configuration or grants"
			}
			fmt.Fprintf(stdout, "FAIL  %-9s %v (%s)\n", name, err, class)
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(stdout, "ok    %-9s %s\n", name, time.Since(start).Round(time.Millisecond))
		return nil
	}
	start := time.Now()
	src, err := reg.Open(ctx, im.SourceConfig())
	if err := step("connect", start, err); err != nil {
		return err
	}
	defer src.Close()
	start = time.Now()
	schema, err := src.Discover(ctx, im.TableParams)
	if err := step("discover", start, err); err != nil {
		return err
	}
	if err := step("columns", time.Now(), im.CheckSchema(schema)); err != nil {
		return err
	}
	start = time.Now()
	rows := int64(0)
	err = src.Read(ctx, connectors.ReadRequest{Table: im.TableParams, Limit: 1}, func(rec arrow.RecordBatch) error {
		rows += rec.NumRows()
		return nil
	})
	if err := step("read", start, err); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s source, %s: %d columns, primary key %v, %d sample row(s) read\n",
		kind, im.TableParams, len(schema.Columns), schema.PrimaryKey, rows)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tSOURCE TYPE\tARROW TYPE\tNULLABLE")
	for _, c := range schema.Columns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", c.Name, c.SourceType, c.Type, c.Nullable)
	}
	return tw.Flush()
}
