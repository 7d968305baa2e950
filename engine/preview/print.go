package preview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the records, the column report and the problems for a
// person at a terminal.
func WriteText(w io.Writer, r *Report) {
	if r.ConfigErr != nil {
		fmt.Fprintf(w, "The import is not valid:\n%s\n", indent(r.ConfigErr.Error()))
		return
	}
	fmt.Fprintf(w, "Records (%d mapped from %d rows read):\n", len(r.Records), r.Rows)
	for _, rec := range r.Records {
		fmt.Fprintf(w, "  %s\n", rec)
	}
	fmt.Fprintln(w, "\nColumns:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  COLUMN\tTYPE\tARROW\tBECOMES\tNULLS\tEXAMPLE\tNOTE")
	for _, c := range r.Columns {
		becomes := string(c.Role)
		if c.Property != "" {
			becomes = c.Property
		}
		var notes []string
		if c.Renamed {
			notes = append(notes, "renamed")
		}
		if c.Flattened {
			notes = append(notes, "flattened")
		}
		if c.Note != "" {
			notes = append(notes, c.Note)
		}
		typ := "?"
		if c.Type != nil {
			typ = c.Type.String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.Column, c.SourceType, typ, becomes, c.Nulls, c.Example, strings.Join(notes, ", "))
	}
	tw.Flush()
	if len(r.RowErrors) == 0 {
		fmt.Fprintln(w, "\nNo problems in the sample.")
		return
	}
	fmt.Fprintf(w, "\nProblems (%d rows would be refused):\n", len(r.RowErrors))
	for _, e := range r.RowErrors {
		fmt.Fprintf(w, "  %s\n", e.Error())
	}
}

// WriteNDJSON prints only the records, one per line, for piping; the
// report goes to the second writer.
func WriteNDJSON(records, report io.Writer, r *Report) {
	for _, rec := range r.Records {
		fmt.Fprintf(records, "%s\n", rec)
	}
	if r.ConfigErr != nil {
		fmt.Fprintf(report, "The import is not valid:\n%s\n", indent(r.ConfigErr.Error()))
	}
	for _, e := range r.RowErrors {
		fmt.Fprintf(report, "%s\n", e.Error())
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
