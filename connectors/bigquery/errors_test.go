package bigquery

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributary-dev/tributary/connectors"
)

// Error classification through the real client libraries: the REST stub
// answers with BigQuery's error JSON, bqread with gRPC statuses.
func TestErrorsClassified(t *testing.T) {
	e := newStubEnv(t)
	e.series(t, "d", "series", 5000)
	src, err := e.open(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The REST client retries 5xx and rate limits until the context's
	// deadline: transient by its own account, too. Those cases get a short
	// deadline; the others 30s, so a loaded machine cannot turn them into a timeout.
	read := func(name string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return src.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Name: name}}, func(arrow.RecordBatch) error { return nil })
	}
	if err := read("series", 30*time.Second); err != nil {
		t.Fatalf("a plain read fails: %v", err)
	}
	cases := []struct {
		name      string
		rest      func(*http.Request) (int, string)
		grpc      func(method, table string, sent int64) error
		permanent bool
		notFound  bool
		hint      string // in the message: what to fix
		retried   bool   // the client retries until the deadline
	}{
		{name: "REST 401", rest: always(401, "unauthorized"), permanent: true, hint: "credentials"},
		{name: "REST 403 accessDenied", rest: always(403, "accessDenied"), permanent: true, hint: "roles/bigquery"},
		{name: "REST 403 rateLimitExceeded", rest: always(403, "rateLimitExceeded"), retried: true},
		{name: "REST 400 invalid", rest: always(400, "invalid"), permanent: true, hint: "invalid"},
		{name: "REST 503", rest: always(503, "backendError"), retried: true},
		{name: "REST 500", rest: always(500, "internalError"), retried: true},
		{name: "gRPC PermissionDenied", grpc: grpcFail("CreateReadSession", codes.PermissionDenied), permanent: true, hint: "readSessionUser"},
		{name: "gRPC Unauthenticated", grpc: grpcFail("CreateReadSession", codes.Unauthenticated), permanent: true, hint: "credentials"},
		{name: "gRPC NotFound", grpc: grpcFail("CreateReadSession", codes.NotFound), permanent: true, notFound: true},
		{name: "gRPC ResourceExhausted", grpc: grpcFail("CreateReadSession", codes.ResourceExhausted)},
		{name: "gRPC Unavailable in every ReadRows", grpc: grpcFail("ReadRows", codes.Unavailable)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.rest.fail, e.srv.Fault = c.rest, c.grpc
			defer func() { e.rest.fail, e.srv.Fault = nil, nil }()
			timeout := 30 * time.Second
			if c.retried {
				timeout = 3 * time.Second
			}
			err := read("series", timeout)
			if err == nil {
				t.Fatal("no error")
			}
			if connectors.IsPermanent(err) != c.permanent || errors.Is(err, connectors.ErrNotFound) != c.notFound {
				t.Errorf("%v: permanent=%v notFound=%v, want %v %v", err, connectors.IsPermanent(err), errors.Is(err, connectors.ErrNotFound), c.permanent, c.notFound)
			}
			if !strings.Contains(err.Error(), c.hint) {
				t.Errorf("%v: no hint %q", err, c.hint)
			}
		})
	}

	t.Run("missing table", func(t *testing.T) {
		err := read("nope", 30*time.Second)
		if !errors.Is(err, connectors.ErrNotFound) || !connectors.IsPermanent(err) || !strings.Contains(err.Error(), "source.dataset") {
			t.Errorf("missing table: %v", err)
		}
	})
	t.Run("resume after a transient failure mid-stream", func(t *testing.T) {
		failed := 0
		e.srv.Fault = func(method, table string, sent int64) error {
			if method == "ReadRows" && sent > 0 && failed < 2 {
				failed++
				return status.Error(codes.Unavailable, "connection reset")
			}
			return nil
		}
		e.srv.MinStreamRows = 1 << 20 // one stream of several batches
		defer func() { e.srv.Fault, e.srv.MinStreamRows = nil, 1024 }()
		var rows, sum int64
		err := src.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Name: "series"}, Columns: []string{"id"}}, func(rec arrow.RecordBatch) error {
			rows += rec.NumRows()
			for _, v := range rec.Column(0).(interface{ Int64Values() []int64 }).Int64Values() {
				sum += v
			}
			return nil
		})
		if err != nil || failed != 2 || rows != 5000 || sum != 5000*4999/2 {
			t.Errorf("err %v after %d failures: %d rows, id sum %d", err, failed, rows, sum)
		}
	})
}

func always(code int, reason string) func(*http.Request) (int, string) {
	return func(*http.Request) (int, string) { return code, reason }
}

func grpcFail(method string, code codes.Code) func(string, string, int64) error {
	return func(m, _ string, _ int64) error {
		if m == method {
			return status.Error(code, "test server says "+code.String())
		}
		return nil
	}
}

// Open fails permanently, before any read, on credentials it cannot use
// and on a dataset the service does not know, with the field to fix.
func TestOpenErrors(t *testing.T) {
	e := newStubEnv(t)
	cases := []struct {
		fields map[string]string
		fail   func(*http.Request) (int, string)
		hint   string
	}{
		{fields: map[string]string{"credentials_json": `{"type": "authorized_user"}`}, hint: "source.credentials_json"},
		{fields: map[string]string{"credentials_file": "/nonexistent/key.json"}, hint: "source.credentials_file"},
		{fields: map[string]string{"max_streams": "0"}, hint: "source.max_streams"},
		{fail: always(401, "unauthorized"), hint: "credentials"},
		{fail: always(403, "accessDenied"), hint: "roles/bigquery"},
		{fail: always(404, "notFound"), hint: "source.dataset"},
	}
	for _, c := range cases {
		e.rest.fail = c.fail
		_, err := e.open(t, c.fields)
		if err == nil || !connectors.IsPermanent(err) || !strings.Contains(err.Error(), c.hint) {
			t.Errorf("%v: %v, want a permanent error naming %s", c.fields, err, c.hint)
		}
	}
}

// Without credentials fields and without Application Default Credentials,
// Open fails permanently and says which fields to set.
func TestOpenWithoutCredentials(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")
	_, err := Open(context.Background(), map[string]string{"project": "p"})
	if err == nil || !connectors.IsPermanent(err) || !strings.Contains(err.Error(), "source.credentials_file") {
		t.Fatalf("%v, want a permanent error naming the credentials fields", err)
	}
}

// A service-account key the identity service refuses (revoked, or of
// another project): the token endpoint answers invalid_grant, and the
// API 401 for a self-signed token; either way the error is permanent.
func TestRevokedKey(t *testing.T) {
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}`))
	}))
	defer tokens.Close()
	pk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(pk)
	key, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "reader@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokens.URL,
	})
	e := newStubEnv(t)
	e.rest.fail = func(r *http.Request) (int, string) {
		if r.Header.Get("Authorization") != "" {
			return http.StatusUnauthorized, "authError"
		}
		return 0, ""
	}
	_, err = e.open(t, map[string]string{"credentials_json": string(key)})
	if err == nil || !connectors.IsPermanent(err) || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("%v, want a permanent authentication error", err)
	}
	t.Log(err)
}
