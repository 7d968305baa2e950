package sfserver

import (
	"context"
	"fmt"
)

// SetChangeTracking turns table name's change tracking on or off, as
// its owner's ALTER TABLE … SET CHANGE_TRACKING does over the wire, for
// fixtures that hold no Snowflake connection of their own.
func (s *Server) SetChangeTracking(ctx context.Context, name string, on bool) error {
	q := &query{sess: &session{database: s.cfg.Database, schema: s.cfg.Schema}}
	if _, err := s.alterTable(ctx, q, name, "CHANGE_TRACKING", fmt.Sprint(on)); err != nil {
		return fmt.Errorf("sfserver: change tracking of %s: %w", name, err)
	}
	return nil
}
