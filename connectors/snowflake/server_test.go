package snowflake

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
)

// testKey is one RSA key for all key-pair tests; generating one is slow.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func keyPEM(t testing.TB, k *rsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// newServer starts a fake Snowflake with user TESTER (password "secret",
// public key of testKey) and stops it with the test.
func newServer(t testing.TB, cfg sfserver.Config) *sfserver.Server {
	t.Helper()
	if cfg.Users == nil {
		cfg.Users = map[string]sfserver.User{"TESTER": {Password: "secret", PublicKey: &testKey().PublicKey}}
	}
	srv, err := sfserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// passwordFields are the connection fields of TESTER on srv.
func passwordFields(srv *sfserver.Server) map[string]string {
	return map[string]string{"account": srv.Account(), "user": "tester", "password": "secret",
		"warehouse": "TEST_WH", "database": "TESTDB", "schema": "PUBLIC", "role": "READER"}
}

// openFields opens a source with fields, pointed at srv over plain HTTP
// (an option the user-facing fields deliberately do not offer).
func openFields(ctx context.Context, srv *sfserver.Server, fields map[string]string) (*Source, error) {
	cfg, err := config(fields)
	if err != nil {
		return nil, err
	}
	cfg.Protocol, cfg.Host, cfg.Port = "http", srv.Host(), srv.Port()
	cfg.MaxRetryCount = 2
	return open(ctx, cfg)
}

func openSource(t testing.TB, srv *sfserver.Server) *Source {
	t.Helper()
	src, err := openFields(context.Background(), srv, passwordFields(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}
