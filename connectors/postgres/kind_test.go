package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tributary-dev/tributary/connectors"
)

func TestKindFields(t *testing.T) {
	k := Kind()
	secret := map[string]bool{}
	for _, f := range k.Fields {
		secret[f.Name] = f.Secret
	}
	if !secret["password"] || !secret["dsn"] || secret["host"] {
		t.Errorf("secret fields %v: want password and dsn only", secret)
	}
	reg := connectors.NewRegistry(k)
	cases := []struct {
		fields map[string]string
		field  string // offending field, "" when valid
	}{
		{map[string]string{"host": "db.internal", "user": "u", "password": "p", "database": "d"}, ""},
		{map[string]string{"dsn": "postgres://u@h/d"}, ""},
		{map[string]string{}, "source.host"},
		{map[string]string{"host": "h", "port": "5432x"}, "source.port"},
		{map[string]string{"host": "h", "port": "70000"}, "source.port"},
		{map[string]string{"host": "h", "sslmode": "prefer"}, "source.sslmode"},
		{map[string]string{"host": "h", "sslmode": "verify-ca"}, ""},
		{map[string]string{"dsn": "host=h", "password": "p"}, "source.password"},
		{map[string]string{"host": "h", "warehouse": "w"}, "source.warehouse"},
	}
	for _, c := range cases {
		err := reg.Validate(connectors.Config{Kind: "postgres", Fields: c.fields})
		var fe *connectors.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%v: %v", c.fields, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%v: error %v, want one on %s", c.fields, err, c.field)
		}
	}
}

// TestConnString checks the defaults and quoting pgx finally sees.
func TestConnString(t *testing.T) {
	cases := []struct {
		fields  map[string]string
		tls     bool // TLS required, certificate verified
		noTLS   bool
		host    string
		pass    string
		db      string
		port    uint16
		skipVer bool
	}{
		{fields: map[string]string{"host": "db.example.com", "password": `it's a \ 'secret' sslmode=disable`, "database": "an alytics"},
			tls: true, host: "db.example.com", pass: `it's a \ 'secret' sslmode=disable`, db: "an alytics", port: 5432},
		{fields: map[string]string{"host": "localhost", "port": "6543", "sslmode": "disable"}, noTLS: true, host: "localhost", port: 6543},
		{fields: map[string]string{"host": "h", "sslmode": "require"}, host: "h", port: 5432, skipVer: true},
		{fields: map[string]string{"dsn": "postgres://u:pw@db.example.com:5439/dev"}, tls: true, host: "db.example.com", pass: "pw", db: "dev", port: 5439},
		{fields: map[string]string{"dsn": "postgresql://u@h/d?sslmode=disable"}, noTLS: true, host: "h", db: "d", port: 5432},
		{fields: map[string]string{"dsn": "host=h dbname=d"}, tls: true, host: "h", db: "d", port: 5432},
		{fields: map[string]string{"dsn": "host=h sslmode=disable"}, noTLS: true, host: "h", port: 5432},
	}
	for _, c := range cases {
		cs, err := connString(c.fields)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgconn.ParseConfig(cs)
		if err != nil {
			t.Fatalf("%v: %v", c.fields, err)
		}
		if cfg.Host != c.host || cfg.Port != c.port || cfg.Password != c.pass || cfg.Database != c.db {
			t.Errorf("%v: host %q port %d password %q database %q", c.fields, cfg.Host, cfg.Port, cfg.Password, cfg.Database)
		}
		if (cfg.TLSConfig == nil) != c.noTLS || len(cfg.Fallbacks) != 0 {
			t.Errorf("%v: TLS %v with %d fallbacks, want TLS=%v and no plain-text fallback", c.fields, cfg.TLSConfig != nil, len(cfg.Fallbacks), !c.noTLS)
		}
		if c.tls && (cfg.TLSConfig.InsecureSkipVerify && cfg.TLSConfig.VerifyPeerCertificate == nil || cfg.TLSConfig.ServerName != c.host) {
			t.Errorf("%v: certificate or host name not verified", c.fields)
		}
		if c.skipVer && !cfg.TLSConfig.InsecureSkipVerify {
			t.Errorf("%v: require should not verify the certificate", c.fields)
		}
	}
}

func TestOpenRedactsPassword(t *testing.T) {
	_, err := Open(context.Background(), map[string]string{"dsn": "host=h password=hunter2 sslmode=bogus"})
	if err == nil || strings.Contains(err.Error(), "hunter2") || !connectors.IsPermanent(err) {
		t.Errorf("bad dsn: %v, want a permanent error without the password", err)
	}
}
