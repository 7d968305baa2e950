package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/preview"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/server"
)

// files collects repeated -c flags.
type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

// importEnv is what import files are read and checked against: the
// server config's connections, projects and schedule floor.
type importEnv struct {
	loader importspec.Loader
	rules  importspec.Rules // rules.Projects is nil without a config
}

// loadImportEnv reads the server config at path; a missing default config
// is not an error (validate then skips the ID-mode checks, and no
// connection resolves), a missing explicit one is. Sources open under the
// config's limits (allowed_paths, the server's own files refused), so a
// command reads what the server would and no more; without a config,
// under the defaults' (no allowed_paths, ./data and configs/imports
// refused). What a source keeps out of its errors goes to log (nil: none).
func loadImportEnv(path string, explicit bool, log *slog.Logger) (importEnv, error) {
	cfg := &config.Config{DataDir: "./data", ImportsDir: "configs/imports"}
	loaded := false
	if _, err := os.Stat(path); err == nil || explicit {
		c, err := config.LoadForImports(path)
		if err != nil {
			return importEnv{}, err
		}
		cfg, loaded = c, true
	}
	reg, err := server.SourceRegistry(cfg, log)
	if err != nil {
		return importEnv{}, err
	}
	env := importEnv{loader: importspec.Loader{Registry: reg}, rules: importspec.Rules{Registry: reg}}
	if !loaded {
		return env, nil
	}
	conns, err := server.Connections(cfg)
	if err != nil {
		return env, err
	}
	env.loader.Connections = conns
	env.rules = server.ImportRules(cfg)
	return env, nil
}

func flagSet(name string, stderr io.Writer) (*flag.FlagSet, *files, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var fl files
	fs.Var(&fl, "c", "import file (repeatable)")
	cfg := fs.String("config", "configs/tributary.yaml", "server config (supplies the projects and their ID modes)")
	return fs, &fl, cfg
}

func explicitFlag(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// validate checks import files without connecting to anything.
func validate(args []string, stdout, stderr io.Writer) error {
	fs, fl, cfgPath := flagSet("validate", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	paths := append(*fl, fs.Args()...)
	if len(paths) == 0 {
		return errors.New("validate: give import files with -c FILE")
	}
	env, err := loadImportEnv(*cfgPath, explicitFlag(fs, "config"), nil)
	if err != nil {
		return err
	}
	bad := 0
	for _, p := range paths {
		im, err := env.loader.File(p)
		if err == nil {
			err = im.Check(env.rules)
		}
		if err != nil {
			bad++
			fmt.Fprintf(stderr, "%s\n", err)
			continue
		}
		fmt.Fprintf(stdout, "%s: ok (%s %s, %s)\n", p, im.ImportType, im.SyncMode, im.ID)
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d import files are invalid", bad, len(paths))
	}
	return nil
}

// previewCmd maps a sample of an import's table and prints it.
func previewCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, fl, cfgPath := flagSet("preview", stderr)
	limit := fs.Int64("limit", 20, "rows to read")
	format := fs.String("format", "table", "table or ndjson (records on stdout, problems on stderr)")
	changes := fs.Bool("changes", false, "sync_mode mirror: print what the next run would insert, update and delete (reads the store; writes nothing)")
	dataDir := fs.String("data-dir", "", "data directory for --changes (overrides the config's data_dir)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	paths := append(*fl, fs.Args()...)
	if len(paths) != 1 {
		return errors.New("preview: give one import file with -c FILE")
	}
	if *changes {
		return previewChanges(ctx, *cfgPath, *dataDir, paths[0], stdout, stderr)
	}
	if *format != "table" && *format != "ndjson" {
		return fmt.Errorf("preview: --format %q: use table or ndjson", *format)
	}
	// Through the server's limits: a preview reads what a sync would, no
	// more, and writes nothing (every source reads in a read-only
	// transaction).
	env, err := loadImportEnv(*cfgPath, true, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	reg := env.loader.Registry
	im, err := env.loader.File(paths[0])
	if err != nil {
		return err
	}
	project, ok := env.rules.Projects(im.ProjectID)
	if !ok {
		return &importspec.Error{File: im.File(), Key: "project_id", Msg: fmt.Sprintf("no project %d in %s", im.ProjectID, *cfgPath)}
	}
	rep, err := preview.Run(ctx, preview.Options{Registry: reg, Import: im, Project: project, Limit: *limit})
	if err != nil {
		return err
	}
	if *format == "ndjson" {
		preview.WriteNDJSON(stdout, stderr, rep)
	} else {
		preview.WriteText(stdout, rep)
	}
	if rep.ConfigErr != nil {
		return errors.New("the import is not valid")
	}
	return nil
}
