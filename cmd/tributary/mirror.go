package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/tributary-dev/tributary/engine/importspec"
	syncrun "github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/server"
)

// previewChanges is `tributary preview --changes`: what the next Mirror
// run of the import would insert, update and delete, against the state
// in the server's store. It writes nothing (the store is opened like
// `tributary sync` opens it, so the server must not be running).
func previewChanges(ctx context.Context, cfgPath, dataDir, path string, stdout, stderr io.Writer) error {
	env, err := loadImportEnv(cfgPath, true, nil)
	if err != nil {
		return err
	}
	im, err := env.loader.File(path)
	if err != nil {
		return err
	}
	if !im.IsMirror() {
		return &importspec.Error{File: im.File(), Key: "sync_mode", Msg: "--changes needs sync_mode mirror"}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, st, release, err := openDataDir(ctx, cfgPath, dataDir, log, storeTuning{})
	if err != nil {
		return err
	}
	defer release()
	reg, err := server.SourceRegistry(cfg, log)
	if err != nil {
		return err
	}
	project, ok := server.ProjectLookup(cfg)(im.ProjectID)
	if !ok {
		return &importspec.Error{File: im.File(), Key: "project_id", Msg: fmt.Sprintf("no project %d in %s", im.ProjectID, cfgPath)}
	}
	if err := im.Check(server.ImportRules(cfg)); err != nil {
		return err
	}
	r := &syncrun.Runner{Registry: reg, Store: st, Log: log}
	plan, err := r.PlanMirror(ctx, im, project)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "import %s: the next mirror run would insert %d, update %d and delete %d rows (%d unchanged)\n",
		im.ID, plan.Inserts, plan.Updates, plan.Deletes, plan.Unchanged)
	if len(plan.InsertKeys) > 0 {
		fmt.Fprintf(stdout, "  insert keys (sample): %s\n", strings.Join(plan.InsertKeys, "; "))
	}
	if len(plan.UpdateKeys) > 0 {
		fmt.Fprintf(stdout, "  update keys (sample): %s\n", strings.Join(plan.UpdateKeys, "; "))
	}
	if im.MaxDeletes > 0 || im.MaxChangeRatio > 0 {
		if err := syncrun.CheckLimits(im, plan); err != nil {
			fmt.Fprintf(stdout, "  the run would stop: %v\n", err)
		}
	}
	return nil
}

// mirrorChanges returns the Mirror counts of runs as text, by run id.
func mirrorChanges(ctx context.Context, st store.Store, project int64, runs []store.Run) map[string]string {
	out := map[string]string{}
	ms, ok := st.(store.Mirrors)
	if !ok || len(runs) == 0 {
		return out
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	counts, err := ms.MirrorRunCounts(ctx, project, ids)
	if err != nil {
		return out
	}
	for id, c := range counts {
		out[id] = fmt.Sprintf("+%d ~%d -%d =%d", c.Inserted, c.Updated, c.Deleted, c.Unchanged)
	}
	return out
}
