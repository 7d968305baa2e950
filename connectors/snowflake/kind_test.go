package snowflake

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	sf "github.com/snowflakedb/gosnowflake"

	"github.com/tributary-dev/tributary/connectors"
)

func TestKindFields(t *testing.T) {
	k := Kind()
	secret := map[string]bool{}
	for _, f := range k.Fields {
		secret[f.Name] = f.Secret
	}
	if !secret["password"] || !secret["private_key"] || secret["account"] || secret["private_key_path"] {
		t.Errorf("secret fields %v: want password and private_key only", secret)
	}
	reg := connectors.NewRegistry(k)
	base := func(extra map[string]string) map[string]string {
		f := map[string]string{"account": "myorg-acct", "user": "u"}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	cases := []struct {
		fields map[string]string
		field  string // offending field, "" when valid
	}{
		{base(map[string]string{"password": "p", "warehouse": "wh", "database": "db", "schema": "s", "role": "r"}), ""},
		{base(map[string]string{"private_key": "-----BEGIN PRIVATE KEY-----"}), ""},
		{base(map[string]string{"private_key_path": "/keys/rsa.p8"}), ""},
		{base(nil), "source.password"},
		{base(map[string]string{"password": "p", "private_key": "k"}), "source.password"},
		{map[string]string{"user": "u", "password": "p"}, "source.account"},
		{base(map[string]string{"account": "https://myorg-acct.snowflakecomputing.com", "password": "p"}), "source.account"},
		{base(map[string]string{"password": "p", "dsn": "x"}), "source.dsn"},
	}
	for _, c := range cases {
		err := reg.Validate(connectors.Config{Kind: "snowflake", Fields: c.fields})
		var fe *connectors.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%v: %v", c.fields, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%v: error %v, want one on %s", c.fields, err, c.field)
		}
	}
}

func TestConfig(t *testing.T) {
	cfg, err := config(map[string]string{"account": "xy12345.eu-west-1", "user": "u", "password": "p", "warehouse": "WH",
		"database": "DB", "schema": "S", "role": "R", "host": "acct.privatelink.snowflakecomputing.com"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Account != "xy12345.eu-west-1" || cfg.Warehouse != "WH" || cfg.Role != "R" || cfg.Host != "acct.privatelink.snowflakecomputing.com" ||
		cfg.Authenticator != 0 || *cfg.Params["TIMEZONE"] != "UTC" {
		t.Errorf("config %+v", cfg)
	}
	cfg, err = config(map[string]string{"account": "a", "user": "u", "private_key": keyPEM(t, testKey())})
	if err != nil || cfg.Authenticator != sf.AuthTypeJwt || !cfg.PrivateKey.Equal(testKey()) {
		t.Fatalf("key-pair config: %v", err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	bad := map[string]string{
		"not pem":   "hunter2",
		"encrypted": "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----",
		"pkcs1":     string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey())})),
		"ecdsa":     string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})),
	}
	for name, key := range bad {
		_, err := Open(context.Background(), map[string]string{"account": "a", "user": "u", "private_key": key})
		var fe *connectors.FieldError
		if !errors.As(err, &fe) || fe.Field != "source.private_key" || !connectors.IsPermanent(err) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s key: %v, want a permanent error on source.private_key", name, err)
		}
	}
	_, err = Open(context.Background(), map[string]string{"account": "a", "user": "u", "private_key_path": "/no/such/key.p8"})
	if !connectors.IsPermanent(err) || !strings.Contains(err.Error(), "private_key_path") {
		t.Errorf("missing key file: %v", err)
	}
}

func TestTableRef(t *testing.T) {
	cases := map[string]string{
		"events":                    `"EVENTS"`,
		"analytics.public.events":   `"ANALYTICS"."PUBLIC"."EVENTS"`,
		`public."MixedCase"`:        `"PUBLIC"."MixedCase"`,
		`"my.db"."sch"."t ""q"""`:   `"my.db"."sch"."t ""q"""`,
		` raw . events `:            `"RAW"."EVENTS"`,
		`events"; DROP TABLE x; --`: `"EVENTS""; DROP TABLE X; --"`,
	}
	for in, want := range cases {
		got, err := tableRef(in)
		if err != nil || got != want {
			t.Errorf("tableRef(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a.b.c.d", `"open`, "a..b", "a."} {
		if _, err := tableRef(in); !errors.Is(err, connectors.ErrBadRequest) {
			t.Errorf("tableRef(%q): %v, want ErrBadRequest", in, err)
		}
	}
}
