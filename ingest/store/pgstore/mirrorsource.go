package pgstore

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// mirrorSourcesMigration records each Mirror run's table rows (the
// volume rule compares Mirror runs by them) and Mirror imports' sources
// (store.MirrorSources).
const mirrorSourcesMigration = `ALTER TABLE mirror_runs ADD COLUMN table_rows bigint NOT NULL DEFAULT 0;
	CREATE TABLE mirror_sources (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		source text NOT NULL,
		PRIMARY KEY (project, import));`

// MirrorNoteSource implements store.MirrorSources.
func (s *Store) MirrorNoteSource(ctx context.Context, ms store.MirrorSource) error {
	if err := s.enter("mirror note source"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.pool.Exec(ctx, `INSERT INTO mirror_sources VALUES ($1, $2, $3)
		ON CONFLICT (project, import) DO UPDATE SET source = excluded.source`, ms.Project, ms.Import, string(ms.Source)); err != nil {
		return fmt.Errorf("pgstore: mirror note source: %w", err)
	}
	return nil
}

// MirrorSources implements store.MirrorSources.
func (s *Store) MirrorSources(ctx context.Context) ([]store.MirrorSource, error) {
	if err := s.enter("mirror sources"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT project, import, source FROM mirror_sources ORDER BY project, import`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: mirror sources: %w", err)
	}
	defer rows.Close()
	var out []store.MirrorSource
	for rows.Next() {
		var ms store.MirrorSource
		var src string
		if err := rows.Scan(&ms.Project, &ms.Import, &src); err != nil {
			return nil, fmt.Errorf("pgstore: mirror sources: %w", err)
		}
		ms.Source = []byte(src)
		out = append(out, ms)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: mirror sources: %w", err)
	}
	return out, nil
}

// MirrorForgetSource implements store.MirrorSources.
func (s *Store) MirrorForgetSource(ctx context.Context, project int64, importID string) error {
	if err := s.enter("mirror forget source"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.pool.Exec(ctx, `DELETE FROM mirror_sources WHERE project = $1 AND import = $2`, project, importID); err != nil {
		return fmt.Errorf("pgstore: mirror forget source: %w", err)
	}
	return nil
}
