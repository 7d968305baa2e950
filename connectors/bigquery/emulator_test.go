package bigquery

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/option"

	"github.com/tributary-dev/tributary/connectors/bigquery/bqread"
)

// The REST side is tested against github.com/goccy/bigquery-emulator
// (v0.6.6, built by .ci/bigquery-emulator.sh): BIGQUERY_EMULATOR names the
// binary, else the script's cache path is tried. One emulator serves the
// whole test binary; each fixture gets its own dataset.
const emuProject = "tributary-test"

type emulator struct {
	endpoint string
	client   *bq.Client
	cmd      *exec.Cmd
}

var (
	emuOnce sync.Once
	emu     *emulator
	emuErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if emu != nil {
		emu.client.Close()
		emu.cmd.Process.Kill()
		emu.cmd.Wait()
	}
	os.Exit(code)
}

func emulatorBinary() (string, error) {
	if p := os.Getenv("BIGQUERY_EMULATOR"); p != "" {
		return p, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "tributary", "bigquery-emulator-v0.6.6")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no emulator binary (set BIGQUERY_EMULATOR or run .ci/bigquery-emulator.sh): %w", err)
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startEmulator() (*emulator, error) {
	bin, err := emulatorBinary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	grpcPort, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--project="+emuProject, "--host=127.0.0.1",
		fmt.Sprintf("--port=%d", port), fmt.Sprintf("--grpc-port=%d", grpcPort), "--log-level=error")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e := &emulator{endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(e.endpoint + "/bigquery/v2/projects/" + emuProject + "/datasets")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("emulator did not start: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.client, err = bq.NewClient(context.Background(), emuProject,
		option.WithEndpoint(e.endpoint+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	return e, nil
}

// needEmulator returns the shared emulator. Without one the test is
// skipped loudly, or fails under CI=true, where a skip would hide that
// nothing was tested.
func needEmulator(t testing.TB) *emulator {
	t.Helper()
	emuOnce.Do(func() { emu, emuErr = startEmulator() })
	if emuErr != nil {
		msg := "the BigQuery emulator is not available, so the bigquery source's REST side is NOT TESTED: " + emuErr.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("\n\n*** SKIPPED: " + msg + " ***\n")
	}
	return emu
}

func randomName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// env is one test's dataset in the emulator and Storage Read server.
type env struct {
	emu     *emulator
	srv     *bqread.Server
	dataset string
}

// newEnv creates a dataset in the emulator and a Storage Read server
// that copies tables it does not hold from the emulator.
func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{emu: needEmulator(t), dataset: randomName("t_")}
	ctx := context.Background()
	if err := e.emu.client.Dataset(e.dataset).Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.emu.client.Dataset(e.dataset).DeleteWithContents(context.Background()) })
	srv, err := bqread.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	srv.Resolve = func(ctx context.Context, project, dataset, table string) error {
		var fix func(bq.Schema, []bq.Value) error
		if strings.HasPrefix(table, "tributary_read_") {
			fix = undoResultEncoding
		}
		return srv.CopyFrom(ctx, e.emu.client, project, dataset, table, fix)
	}
	e.srv = srv
	return e
}

// undoResultEncoding corrects a bug of the emulator (v0.6.6): it writes a
// query's result into the destination table from the REST encoding of the
// rows, so a BYTES value is stored as its base64 text and a JSON value as
// a JSON string holding the JSON text. BigQuery stores the values
// themselves; so does the Storage Read server after this. Only top-level
// columns of the connector's own result tables (tributary_read_*) are
// touched, and the connector never sees REST row data.
func undoResultEncoding(schema bq.Schema, row []bq.Value) error {
	for i, f := range schema {
		if row[i] == nil || f.Repeated {
			continue
		}
		switch f.Type {
		case bq.BytesFieldType:
			b, err := base64.StdEncoding.DecodeString(string(row[i].([]byte)))
			if err != nil {
				return fmt.Errorf("column %s: %w", f.Name, err)
			}
			row[i] = b
		case bq.JSONFieldType:
			var s string
			if err := json.Unmarshal([]byte(row[i].(string)), &s); err != nil {
				return fmt.Errorf("column %s: %w", f.Name, err)
			}
			row[i] = s
		}
	}
	return nil
}

func (e *env) fields() map[string]string {
	return map[string]string{"project": emuProject, "dataset": e.dataset, "staging_dataset": e.dataset,
		"endpoint": e.emu.endpoint, "storage_endpoint": e.srv.Endpoint()}
}

func (e *env) open(t testing.TB, extra map[string]string) *Source {
	t.Helper()
	f := e.fields()
	for k, v := range extra {
		f[k] = v
	}
	src, err := Open(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}
