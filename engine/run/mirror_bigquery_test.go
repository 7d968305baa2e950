package run

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/tributary-dev/tributary/connectors/bigquery/bqread"
	"github.com/tributary-dev/tributary/connectors/kinds"
)

// The Mirror rounds on a BigQuery source: REST (schemas, DML, DDL)
// against the goccy bigquery-emulator, Storage Read against bqread, which
// copies the table from the emulator on each read (the copy is dropped
// after every change). BigQuery's Mirror is the keyed snapshot diff.
func TestMirrorBigQuery(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			// One emulator per store: a second dataset's first read in a
			// shared one was seen to hang in the emulator's row listing.
			emu := startBQEmulator(t)
			ctx := context.Background()
			ds := fmt.Sprintf("mirror_%d", time.Now().UnixNano())
			if err := emu.client.Dataset(ds).Create(ctx, nil); err != nil {
				t.Fatal(err)
			}
			srv, err := bqread.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			srv.Resolve = func(ctx context.Context, project, dataset, table string) error {
				return srv.CopyFrom(ctx, emu.client, project, dataset, table, nil)
			}
			wh := &bqWarehouse{client: emu.client, srv: srv, ds: ds}
			f := newMirrorFixtureOn(t, sc.open(t), wh, kinds.Registry(), nil,
				fmt.Sprintf("source: {kind: bigquery, project: %s, dataset: %s, endpoint: %q, storage_endpoint: %q}\n",
					bqEmuProject, ds, emu.endpoint, srv.Endpoint())+"table_params: {table: ev}\nkey_columns: [id]\n")
			mirrorEventRounds(f)
		})
	}
}

const bqEmuProject = "tributary-test"

type bqEmulator struct {
	endpoint string
	client   *bq.Client
}

// startBQEmulator starts the emulator binary (BIGQUERY_EMULATOR, else
// .ci/bigquery-emulator.sh's cache path) for this test. Without one the
// test is skipped loudly, or fails under CI=true.
func startBQEmulator(t *testing.T) *bqEmulator {
	t.Helper()
	missing := func(err error) {
		msg := "the BigQuery emulator is not available, so Mirror on a bigquery source is NOT TESTED: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("\n\n*** SKIPPED: " + msg + " ***\n")
	}
	bin := os.Getenv("BIGQUERY_EMULATOR")
	if bin == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			missing(err)
		}
		bin = filepath.Join(cache, "tributary", "bigquery-emulator-v0.6.6")
	}
	if _, err := os.Stat(bin); err != nil {
		missing(fmt.Errorf("set BIGQUERY_EMULATOR or run .ci/bigquery-emulator.sh: %w", err))
	}
	port, grpcPort := bqFreePort(t), bqFreePort(t)
	cmd := exec.Command(bin, "--project="+bqEmuProject, "--host=127.0.0.1",
		fmt.Sprintf("--port=%d", port), fmt.Sprintf("--grpc-port=%d", grpcPort), "--log-level=error")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e := &bqEmulator{endpoint: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(e.endpoint + "/bigquery/v2/projects/" + bqEmuProject + "/datasets")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("emulator did not start: %v", err)
		}
	}
	var err error
	e.client, err = bq.NewClient(context.Background(), bqEmuProject, option.WithEndpoint(e.endpoint+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.client.Close() })
	return e
}

func bqFreePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bqWarehouse runs the rounds' SQL on table ev of dataset ds in the
// emulator, as GoogleSQL.
type bqWarehouse struct {
	client *bq.Client
	srv    *bqread.Server
	ds     string
}

func bqEvSchema(extra bool) bq.Schema {
	s := bq.Schema{
		{Name: "id", Type: bq.IntegerFieldType, Required: true},
		{Name: "uid", Type: bq.StringFieldType},
		{Name: "t", Type: bq.TimestampFieldType, Required: true},
		{Name: "plan", Type: bq.StringFieldType},
		{Name: "n", Type: bq.IntegerFieldType},
	}
	if extra {
		s = append(s, &bq.FieldSchema{Name: "extra", Type: bq.StringFieldType})
	}
	return s
}

func (w *bqWarehouse) exec(t *testing.T, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	ds := w.client.Dataset(w.ds)
	for _, s := range stmts {
		var err error
		switch {
		case strings.HasPrefix(s, "CREATE TABLE ev ("):
			err = ds.Table("ev").Create(ctx, &bq.TableMetadata{Schema: bqEvSchema(strings.Contains(s, "extra"))})
		case strings.HasPrefix(s, "ALTER TABLE ev ADD COLUMN extra"):
			// The emulator has no ALTER TABLE, and its schema updates do not
			// reach its query engine: the table is rebuilt with the same rows
			// and the new NULL column, which the snapshot diff cannot tell apart.
			tmp := w.ds + ".ev_add"
			for _, q := range []string{"CREATE TABLE " + tmp + " AS SELECT *, CAST(NULL AS STRING) AS extra FROM " + w.ds + ".ev"} {
				if err = w.run(ctx, q); err != nil {
					break
				}
			}
			if err == nil {
				err = ds.Table("ev").Delete(ctx)
			}
			if err == nil {
				err = ds.Table("ev").Create(ctx, &bq.TableMetadata{Schema: bqEvSchema(true)})
			}
			if err == nil {
				err = w.run(ctx, "INSERT INTO "+w.ds+".ev (id, uid, t, plan, n, extra) SELECT id, uid, t, plan, n, extra FROM "+tmp)
			}
			if err == nil {
				err = ds.Table("ev_add").Delete(ctx)
			}
		case s == "DROP TABLE ev" || s == "DROP TABLE ev2":
			err = ds.Table(strings.TrimPrefix(s, "DROP TABLE ")).Delete(ctx)
		case strings.HasPrefix(s, "INSERT INTO ev "):
			// The emulator wants a column list.
			var md *bq.TableMetadata
			if md, err = ds.Table("ev").Metadata(ctx); err == nil {
				var cols []string
				for _, f := range md.Schema {
					cols = append(cols, f.Name)
				}
				q := strings.Replace(s, "INSERT INTO ev ", "INSERT INTO "+w.ds+".ev ("+strings.Join(cols, ", ")+") ", 1)
				err = w.run(ctx, strings.Replace(q, "FROM ev2", "FROM "+w.ds+".ev2", 1))
			}
		default:
			q := strings.NewReplacer(" ev ", " "+w.ds+".ev ", " ev2", " "+w.ds+".ev2").Replace(s + " ")
			if strings.HasPrefix(s, "DELETE FROM ev") && !strings.Contains(s, "WHERE") {
				q += "WHERE true" // GoogleSQL's DELETE needs one
			}
			err = w.run(ctx, q)
		}
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// The Storage Read side copies the table again on the next read.
	for _, tab := range []string{"ev", "ev2"} {
		if err := w.srv.Exec(ctx, "DROP TABLE IF EXISTS "+bqread.Table(w.ds, tab)); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *bqWarehouse) run(ctx context.Context, q string) error {
	job, err := w.client.Query(q).Run(ctx)
	if err != nil {
		return err
	}
	st, err := job.Wait(ctx)
	if err != nil {
		return err
	}
	return st.Err()
}

func (w *bqWarehouse) query(t *testing.T, q string) []map[string]string {
	t.Helper()
	ctx := context.Background()
	it, err := w.client.Query(strings.Replace(q, "FROM ev", "FROM "+w.ds+".ev", 1)).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for {
		var row []bq.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for i, f := range it.Schema {
			if s, ok := cellText(row[i]); ok {
				m[f.Name] = s
			}
		}
		out = append(out, m)
	}
	return out
}
