package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// runsKey prints what the ledger holds of one source row of an import,
// newest run first (tributary runs --import ID --key KEY).
func runsKey(ctx context.Context, st store.Store, cfg *config.Config, project int64, importID, key string, limit int, stdout io.Writer) error {
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tIMPORT\tKEY\tRUN\tSTARTED\tOUTCOME\tFIELD\tREASON")
	for _, p := range cfg.Projects {
		if project != 0 && p.ID != project {
			continue
		}
		entries, err := st.LedgerHistory(ctx, p.ID, importID, store.LedgerKeyHash(key), limit)
		if err != nil {
			return err
		}
		for _, e := range entries {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, importID, key, e.Run,
				time.UnixMilli(e.AtMs).UTC().Format(time.RFC3339), e.Outcome, e.Field, e.Reason)
		}
	}
	return tw.Flush()
}
