package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tributary-dev/tributary/ingest/store"
)

// printMirrorCounts adds a Mirror run's changes under its summary line
// (nothing for other sync modes, whose runs saved no counts).
func printMirrorCounts(ctx context.Context, w io.Writer, st store.Store, r store.Run) {
	ms, ok := st.(store.Mirrors)
	if !ok {
		return
	}
	counts, err := ms.MirrorRunCounts(ctx, r.Project, []string{r.ID})
	if err != nil {
		return
	}
	if c, ok := counts[r.ID]; ok {
		fmt.Fprintf(w, "mirror %s: %d inserted, %d updated, %d deleted, %d unchanged\n", r.ID, c.Inserted, c.Updated, c.Deleted, c.Unchanged)
	}
}
