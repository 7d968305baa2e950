package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
)

// What a Mirror import keeps outside its records (its state, a History
// table's versions, a Postgres slot and publication) is dropped when the
// import goes: by ForgetMirror when it is deleted through the app API,
// by ForgetRemovedMirrors when its file left imports_dir, which is only
// seen at the next start, with the file gone. So each Mirror run notes
// its source (store.MirrorSources) — a connection's name, or for an
// inline source its kind and a digest of its fields (never the fields:
// they may hold secrets) — and the start finds the source again among
// the connections and imports it still has.

// feedKind is the source kind whose change feed lives in the warehouse
// and must be dropped (Postgres: a slot and a publication; a Snowflake
// stream costs nothing left behind).
const feedKind = "postgres"

// mirrorSource is a Mirror import's noted source.
type mirrorSource struct {
	Connection string           `json:"connection,omitempty"`
	Kind       string           `json:"kind,omitempty"`
	Digest     string           `json:"digest,omitempty"` // sourceDigest of an inline source
	Table      connectors.Table `json:"table"`
	History    bool             `json:"history,omitempty"`
}

// sourceDigest identifies a source's configuration without holding it.
func sourceDigest(c connectors.Config) string {
	h := sha256.New()
	h.Write([]byte(c.Kind))
	keys := make([]string, 0, len(c.Fields))
	for k := range c.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "\x00%s\x00%s", k, c.Fields[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// noteMirrorSource records im's source; a failure only means the source
// cannot be found if the import's file is removed, so it is logged.
func (r *Runner) noteMirrorSource(ctx context.Context, im *importspec.Import) {
	ms, ok := r.Store.(store.MirrorSources)
	if !ok || r.OneOff {
		return
	}
	src := mirrorSource{Connection: im.Connection, Kind: im.SourceKind(), Table: im.TableParams, History: im.IsHistory()}
	if src.Connection == "" {
		src.Digest = sourceDigest(im.SourceConfig())
	}
	b, err := json.Marshal(src)
	if err == nil {
		err = ms.MirrorNoteSource(ctx, store.MirrorSource{Project: im.ProjectID, Import: im.ID, Source: b})
	}
	if err != nil {
		r.log().Warn("sync: noting the mirror import's source", "import", im.ID, "err", err)
	}
}

// KnownSources are the sources a process still has, where a removed Mirror
// import's noted source is looked for.
type KnownSources struct {
	// Connection resolves a connection's name for a project.
	Connection func(id string, project int64) (connectors.Config, error)
	// Configs are the other sources it knows (its imports' and
	// connections'), matched by digest.
	Configs []connectors.Config
}

func (s KnownSources) find(project int64, src mirrorSource) (connectors.Config, bool) {
	if src.Connection != "" {
		if s.Connection == nil {
			return connectors.Config{}, false
		}
		c, err := s.Connection(src.Connection, project)
		return c, err == nil
	}
	for _, c := range s.Configs {
		if c.Kind == src.Kind && sourceDigest(c) == src.Digest {
			return c, true
		}
	}
	return connectors.Config{}, false
}

// ForgetRemovedMirrors drops what the Mirror imports known(project, id)
// no longer lists kept, as ForgetMirror does for an import deleted
// through the app API, logging what it dropped. The state goes in any
// case; a change feed whose source cannot be found (an inline source no
// other import or connection shares) is logged with the statements that
// drop it by hand, and its note kept, so a start that finds the source
// again (its connection configured) still drops it.
func ForgetRemovedMirrors(ctx context.Context, reg *connectors.Registry, st store.Store, srcs KnownSources, known func(project int64, id string) bool, log *slog.Logger) error {
	ms, ok := st.(store.MirrorSources)
	if !ok {
		return nil
	}
	notes, err := ms.MirrorSources(ctx)
	if err != nil {
		return fmt.Errorf("mirror sources: %w", err)
	}
	var errs []error
	for _, n := range notes {
		if known(n.Project, n.Import) {
			continue
		}
		var src mirrorSource
		if err := json.Unmarshal(n.Source, &src); err != nil {
			errs = append(errs, fmt.Errorf("import %s: mirror source: %w", n.Import, err))
			continue
		}
		im := &importspec.Import{ID: n.Import, ProjectID: n.Project, SyncMode: importspec.Mirror, TableParams: src.Table}
		if src.History {
			im.History = &importspec.HistoryOptions{}
		}
		feed := FeedName(im)
		c, found := srcs.find(n.Project, src)
		if !found {
			if err := dropMirrorState(ctx, st, im); err != nil {
				errs = append(errs, fmt.Errorf("import %s of project %d removed from imports_dir: %w", n.Import, n.Project, err))
				continue
			}
			if src.Kind == "" || src.Kind == feedKind {
				// Kept: a start that finds the source again drops the feed.
				log.Error("mirror import removed from imports_dir: its state is dropped, but its source is no longer configured, so its change feed (if it has one) is not; drop it by hand on the warehouse",
					"project", n.Project, "import", n.Import, "table", src.Table.Name, "connection", src.Connection,
					"sql", fmt.Sprintf("SELECT pg_drop_replication_slot('%s'); DROP PUBLICATION IF EXISTS %s;", feed, feed))
				continue
			}
			if err := ms.MirrorForgetSource(ctx, n.Project, n.Import); err != nil {
				errs = append(errs, err)
				continue
			}
			log.Info("mirror import removed from imports_dir: dropped its state", "project", n.Project, "import", n.Import)
			continue
		}
		im.Source = map[string]string{"kind": c.Kind}
		for k, v := range c.Fields {
			im.Source[k] = v
		}
		if err := ForgetMirror(ctx, reg, st, im); err != nil {
			errs = append(errs, fmt.Errorf("import %s of project %d removed from imports_dir: %w", n.Import, n.Project, err))
			continue
		}
		log.Info("mirror import removed from imports_dir: dropped its state and change feed",
			"project", n.Project, "import", n.Import, "table", src.Table.Name, "feed", feed)
	}
	return errors.Join(errs...)
}
