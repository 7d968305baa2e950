package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirDigest hashes every file under dir (path, size, content), so a test
// can tell that a command wrote nothing there.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %x\n", p, len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// preview and sources test go through the same confined sources as a
// sync: each hostile import is refused by both, and neither writes a
// byte, in the data dir or anywhere the probes aim.
func TestPreviewAndSourcesTestRefuseHostileImports(t *testing.T) {
	dir := demoDir(t)
	// A store as the server keeps it: data/tributary.duckdb and its write log.
	store := filepath.Join(dir, "data", "tributary.duckdb")
	db, err := sql.Open("duckdb", store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE events AS SELECT 1 AS project, 'secret' AS name"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.MkdirAll(store+".log", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store+".log", "000001.seg"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "copied.csv")
	head := "id: hostile\nproject_id: 1\nimport_type: people\nsync_mode: full_sync\nuser_column_name: u\n"
	wh := "source: {kind: duckdb, path: ./data/demo-warehouse.duckdb}\n"
	for _, tc := range []struct{ name, body, want string }{
		{"read_text /etc/passwd", wh + `table_params: {query: "SELECT content AS u FROM read_text('/etc/passwd')"}`, "refused"},
		{"store write log", wh + `table_params: {query: "SELECT filename AS u FROM read_blob('./data/tributary.duckdb.log/*')"}`, "refused"},
		{"path at the store", "source: {kind: duckdb, path: ./data/tributary.duckdb}\ntable_params: {table: main.events}", "source.path"},
		{"COPY TO", wh + `table_params: {query: "COPY (SELECT 1 AS u) TO '` + outside + `'"}`, "table_params.query"},
		{"COPY after a SELECT", wh + `table_params: {query: "SELECT 1 AS u; COPY (SELECT 1 AS u) TO '` + outside + `'"}`, "table_params.query"},
		{"ATTACH and DROP", wh + `table_params: {query: "ATTACH './data/tributary.duckdb' AS s; DROP TABLE s.events"}`, "table_params.query"},
		{"INSTALL", wh + `table_params: {query: "INSTALL httpfs"}`, "table_params.query"},
		{"in-memory without allowed_paths", "source: {kind: duckdb}\ntable_params: {table: ./data/demo-warehouse.duckdb}", "allowed_paths"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "hostile.yaml")
			if err := os.WriteFile(file, []byte(head+tc.body+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := dirDigest(t, dir)
			var out, errOut bytes.Buffer
			err := previewCmd(context.Background(), []string{"-c", file}, &out, &errOut)
			if err == nil || !strings.Contains(out.String()+errOut.String()+err.Error(), tc.want) {
				t.Errorf("preview: %v\n%s%s\nwant a refusal naming %q", err, out.String(), errOut.String(), tc.want)
			}
			out.Reset()
			errOut.Reset()
			err = sourcesTest(context.Background(), []string{"test", "-c", file}, &out, &errOut)
			if err == nil || !strings.Contains(out.String(), "FAIL") || !strings.Contains(out.String(), tc.want) {
				t.Errorf("sources test: %v\n%s%s\nwant a FAIL naming %q", err, out.String(), errOut.String(), tc.want)
			}
			if strings.Contains(out.String(), "root:") || strings.Contains(out.String(), "secret") {
				t.Errorf("sources test printed what it read:\n%s", out.String())
			}
			if after := dirDigest(t, dir); after != before {
				t.Error("the working directory (data dir, store, warehouse, imports) changed")
			}
			if _, err := os.Stat(outside); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s was written", outside)
			}
		})
	}
	// A legitimate preview writes nothing either.
	before := dirDigest(t, dir)
	var out, errOut bytes.Buffer
	if err := previewCmd(context.Background(), []string{"-c", "configs/imports/demo-users.yaml", "--limit", "3"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if dirDigest(t, dir) != before {
		t.Error("a preview changed the working directory")
	}
}
