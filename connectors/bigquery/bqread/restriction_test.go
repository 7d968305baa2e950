package bqread

import "testing"

func TestRestriction(t *testing.T) {
	cases := map[string]string{
		"(`ts` > TIMESTAMP '2026-01-01 00:00:00+00:00') OR (`ts` = TIMESTAMP '2026-01-01 00:00:00+00:00' AND `id` > 9)": `("ts" > CAST('2026-01-01 00:00:00+00:00' AS TIMESTAMPTZ)) OR ("ts" = CAST('2026-01-01 00:00:00+00:00' AS TIMESTAMPTZ) AND "id" > 9)`,
		"`dt` > DATETIME '2026-01-01 00:00:00.5'": `"dt" > CAST('2026-01-01 00:00:00.5' AS TIMESTAMP)`,
		"`n` > NUMERIC '1.5' AND `s` = 'it\\'s'":  `"n" > CAST('1.5' AS DECIMAL(38,9)) AND "s" = 'it''s'`,
		"`i` > CAST('7' AS INT64)":                `"i" > CAST('7' AS BIGINT)`,
		"`a\\`b` = FROM_BASE64('AAE=')":           "\"a`b\" = FROM_BASE64('AAE=')",
	}
	for in, want := range cases {
		if got := Restriction(in); got != want {
			t.Errorf("Restriction(%s)\n got %s\nwant %s", in, got, want)
		}
	}
}
