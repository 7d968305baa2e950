package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// preview --changes plans a Mirror run against the store without writing;
// sync applies it; runs shows what each Mirror run changed.
func TestMirrorPreviewSyncRuns(t *testing.T) {
	dir := demoDir(t)
	imp := filepath.Join("configs", "imports", "mirror-users.yaml")
	b, err := os.ReadFile(filepath.Join("configs", "imports", "demo-users.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.Replace(strings.Replace(string(b), "sync_mode: full_sync", "sync_mode: mirror\nmax_deletes: 1", 1), "id: demo-users", "id: mirror-users", 1)
	if err := os.WriteFile(imp, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cmd := func(f func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) error, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := f(ctx, args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out.String(), errOut.String())
		}
		return out.String()
	}
	preview := func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return previewCmd(ctx, a, o, e) }
	syncc := func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return syncCmd(ctx, a, o, e) }
	runs := func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return runsCmd(ctx, a, o, e) }

	out := cmd(preview, "--changes", "-c", imp)
	if !strings.Contains(out, "would insert 500, update 0 and delete 0 rows (0 unchanged)") {
		t.Fatalf("first plan:\n%s", out)
	}
	cmd(syncc, "--quiet", "-c", imp)
	wh, err := sql.Open("duckdb", filepath.Join(dir, "data", "demo-warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE main.users SET name = 'Renamed' WHERE user_id = (SELECT min(user_id) FROM main.users)`,
		`DELETE FROM main.users WHERE user_id = (SELECT max(user_id) FROM main.users)`} {
		if _, err := wh.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	wh.Close()
	out = cmd(preview, "--changes", "-c", imp)
	if !strings.Contains(out, "would insert 0, update 1 and delete 1 rows (498 unchanged)") || !strings.Contains(out, "update keys (sample): ") {
		t.Fatalf("second plan:\n%s", out)
	}
	cmd(syncc, "--quiet", "-c", imp)
	out = cmd(runs, "--import", "mirror-users")
	if !strings.Contains(out, "+0 ~1 -1 =498") || !strings.Contains(out, "+500 ~0 -0 =0") {
		t.Fatalf("runs:\n%s", out)
	}
	out = cmd(preview, "--changes", "-c", imp)
	if !strings.Contains(out, "would insert 0, update 0 and delete 0 rows (499 unchanged)") {
		t.Fatalf("plan after sync:\n%s", out)
	}
}
