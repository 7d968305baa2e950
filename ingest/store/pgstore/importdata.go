package pgstore

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// deleteChunk bounds the rows one deletion transaction removes, so a large
// import's deletion neither holds millions of row locks nor loses all its
// progress to one failure.
const deleteChunk = 50_000

// DeleteImportEvents implements store.ImportData. Dedup is the unique
// index, so a deleted event's key is free once its DELETE commits. The
// props are cast to json, not jsonb: json keeps text as written (jsonb
// refuses \u0000), and strpos spares the parse of events that cannot match.
func (s *Store) DeleteImportEvents(ctx context.Context, project int64, importID string) (int64, error) {
	if err := s.enter("delete import events"); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM events WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM events WHERE project = $1 AND strpos(props, '"`+store.ImportIDProperty+`"') > 0
				AND props::json ->> '`+store.ImportIDProperty+`' = $2 LIMIT $3))`, project, importID, deleteChunk)
		if err != nil {
			return total, fmt.Errorf("pgstore: delete events of import %q: %w", importID, err)
		}
		n := tag.RowsAffected()
		total += n
		if n < deleteChunk {
			return total, nil
		}
	}
}
