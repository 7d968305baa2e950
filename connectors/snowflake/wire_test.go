package snowflake

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// Protocol paths of the driver, each checked through the server's
// counters so a test cannot pass by taking another path.

func countRows(t *testing.T, src *Source, table string) int {
	t.Helper()
	_, rows, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{Table: connectors.Table{Name: table}})
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

func TestKeyPairAuth(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	if err := createSeries(srv, "series", 10); err != nil {
		t.Fatal(err)
	}
	fields := passwordFields(srv)
	delete(fields, "password")
	fields["private_key"] = strings.ReplaceAll(keyPEM(t, testKey()), "\n", `\n`) // as an env var often holds it
	src, err := openFields(context.Background(), srv, fields)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if n := countRows(t, src, "series"); n != 10 {
		t.Fatalf("read %d rows, want 10", n)
	}

	path := filepath.Join(t.TempDir(), "rsa_key.p8")
	if err := os.WriteFile(path, []byte(keyPEM(t, testKey())), 0o600); err != nil {
		t.Fatal(err)
	}
	delete(fields, "private_key")
	fields["private_key_path"] = path
	src2, err := openFields(context.Background(), srv, fields)
	if err != nil {
		t.Fatal(err)
	}
	src2.Close()

	// A key the user is not registered with: the server checks the
	// signature against the registered public key.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	delete(fields, "private_key_path")
	fields["private_key"] = keyPEM(t, other)
	_, err = openFields(context.Background(), srv, fields)
	if !connectors.IsPermanent(err) || !strings.Contains(err.Error(), "390144") {
		t.Fatalf("foreign key: %v, want a permanent JWT error", err)
	}
	if s := srv.Stats(); s.Logins != 2 || s.FailedLogins != 1 {
		t.Errorf("stats %+v: want 2 logins and 1 failure", s)
	}
}

func TestAuthFailuresArePermanent(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	for _, c := range []struct {
		change map[string]string
		want   string
	}{
		{map[string]string{"password": "wrong"}, "390100"},
		{map[string]string{"user": "nobody"}, "390100"},
		{map[string]string{"database": "OTHERDB"}, "source.database"},
	} {
		fields := passwordFields(srv)
		for k, v := range c.change {
			fields[k] = v
		}
		start := time.Now()
		_, err := openFields(context.Background(), srv, fields)
		if !connectors.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a permanent error mentioning %s", c.change, err, c.want)
		}
		if strings.Contains(errString(err), "secret") || strings.Contains(errString(err), "wrong") {
			t.Errorf("%v: error shows the password: %v", c.change, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: failing took %v: a permanent failure must not be retried", c.change, d)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestServerDownIsTransient(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	fields := passwordFields(srv)
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := openFields(ctx, srv, fields)
	if err == nil || connectors.IsPermanent(err) {
		t.Fatalf("server down: %v, want a transient error", err)
	}
}

// A statement Snowflake answers "still running" (333333) is polled
// through its result URL until done.
func TestPolledQuery(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	if err := createSeries(srv, "series", 2500); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	srv.SetPolls(3)
	if n := countRows(t, src, "series"); n != 2500 {
		t.Fatalf("read %d rows, want 2500", n)
	}
	if s := srv.Stats(); s.Polls != 3 {
		t.Errorf("polls %d, want 3", s.Polls)
	}
}

// Cancelling while the statement runs stops the wait and sends Snowflake
// an abort request, so the warehouse stops computing for nobody.
func TestCancelWhileRunning(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	if err := createSeries(srv, "series", 100); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	srv.SetPolls(1_000_000)
	// Cancel once the server is polled, not after a fixed time: on a loaded
	// machine that could pass before the statement reached it (nothing to abort).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan struct{})
	cancelled := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for srv.Stats().Polls == 0 && time.Now().Before(deadline) {
			select {
			case <-returned:
				cancelled <- time.Now()
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		cancelled <- time.Now()
		cancel()
	}()
	_, _, err := sourcetest.Rows(ctx, src, connectors.ReadRequest{Table: connectors.Table{Name: "series"}})
	close(returned)
	at := <-cancelled
	if !errors.Is(err, context.Canceled) || connectors.IsPermanent(err) {
		t.Fatalf("err %v, want the context's cancellation", err)
	}
	if d := time.Since(at); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if s := srv.Stats(); s.Aborts != 1 || s.Polls == 0 {
		t.Errorf("stats %+v: want one abort after some polls", s)
	}
}

// Chunks beyond the inline rows are downloaded, gzipped or not, and
// arrive in order.
func TestChunks(t *testing.T) {
	for _, plain := range []bool{false, true} {
		srv := newServer(t, sfserver.Config{InlineRows: 100, ChunkRows: 1000, PlainChunks: plain})
		if err := createSeries(srv, "series", 5050); err != nil {
			t.Fatal(err)
		}
		src := openSource(t, srv)
		_, rows, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{
			Table: connectors.Table{Name: "series"}, Columns: []string{"id"}, OrderBy: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if r[0] != int64(i) {
				t.Fatalf("row %d has id %v", i, r[0])
			}
		}
		if len(rows) != 5050 {
			t.Fatalf("read %d rows, want 5050", len(rows))
		}
		if s := srv.Stats(); s.Chunks != 5 {
			t.Errorf("plain=%v: %d chunks downloaded, want 5", plain, s.Chunks)
		}
	}
}

// An expired session token (390112) is renewed with the master token and
// the statement retried, without a new login.
func TestSessionRenewal(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	if err := createSeries(srv, "series", 10); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	if n := countRows(t, src, "series"); n != 10 {
		t.Fatalf("read %d rows", n)
	}
	srv.ExpireSessions()
	if n := countRows(t, src, "series"); n != 10 {
		t.Fatalf("read %d rows after expiry", n)
	}
	if _, err := src.Discover(context.Background(), connectors.Table{Name: "series"}); err != nil {
		t.Fatal(err)
	}
	if s := srv.Stats(); s.Renewals != 1 || s.Logins != 1 {
		t.Errorf("stats %+v: want 1 renewal and 1 login", s)
	}
	src.Close()
	if s := srv.Stats(); s.Closed != 1 {
		t.Errorf("sessions closed: %d, want 1", s.Closed)
	}
}

func TestMissingColumnIsPermanent(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	if err := createSeries(srv, "series", 10); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	_, _, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{
		Table: connectors.Table{Name: "series"}, Columns: []string{"nope"}})
	if !errors.Is(err, connectors.ErrNotFound) || !connectors.IsPermanent(err) {
		t.Fatalf("missing column: %v, want ErrNotFound", err)
	}
}
