package duckstore

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// mirrorSourcesTable holds store.MirrorSources (a new table: older files
// gain it at open).
const mirrorSourcesTable = `CREATE TABLE IF NOT EXISTS mirror_sources (
	project BIGINT NOT NULL, import VARCHAR NOT NULL, source VARCHAR NOT NULL, PRIMARY KEY (project, import))`

// MirrorNoteSource implements store.MirrorSources.
func (s *Store) MirrorNoteSource(ctx context.Context, ms store.MirrorSource) error {
	if err := s.enter("mirror note source"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO mirror_sources VALUES (?, ?, ?)
		ON CONFLICT (project, import) DO UPDATE SET source = excluded.source`, ms.Project, ms.Import, string(ms.Source)); err != nil {
		return fmt.Errorf("duckstore: mirror note source: %w", err)
	}
	return nil
}

// MirrorSources implements store.MirrorSources.
func (s *Store) MirrorSources(ctx context.Context) ([]store.MirrorSource, error) {
	if err := s.enter("mirror sources"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.db.QueryContext(ctx, `SELECT project, import, source FROM mirror_sources ORDER BY project, import`)
	if err != nil {
		return nil, fmt.Errorf("duckstore: mirror sources: %w", err)
	}
	defer rows.Close()
	var out []store.MirrorSource
	for rows.Next() {
		var ms store.MirrorSource
		var src string
		if err := rows.Scan(&ms.Project, &ms.Import, &src); err != nil {
			return nil, fmt.Errorf("duckstore: mirror sources: %w", err)
		}
		ms.Source = []byte(src)
		out = append(out, ms)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: mirror sources: %w", err)
	}
	return out, nil
}

// MirrorForgetSource implements store.MirrorSources.
func (s *Store) MirrorForgetSource(ctx context.Context, project int64, importID string) error {
	if err := s.enter("mirror forget source"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM mirror_sources WHERE project = ? AND import = ?`, project, importID); err != nil {
		return fmt.Errorf("duckstore: mirror forget source: %w", err)
	}
	return nil
}
