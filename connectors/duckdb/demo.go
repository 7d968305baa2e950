package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
)

// demoSQL builds a small but realistic warehouse: 20k app events over the
// last week with a JSON properties column and a STRUCT column, the users
// and companies behind them, and an item catalogue for a lookup table.
// setseed makes every machine build the same data.
const demoSQL = `
SELECT setseed(0.42);
CREATE TABLE companies AS
SELECT 'co-' || i AS company_id,
       ['Acme', 'Globex', 'Initech', 'Umbrella', 'Hooli', 'Stark', 'Wayne', 'Wonka'][i % 8 + 1] || ' ' || i AS name,
       ['free', 'growth', 'enterprise'][i % 3 + 1] AS plan,
       (10 + i * 37 % 990)::INTEGER AS employees,
       now()::TIMESTAMP - INTERVAL (i * 3) DAY AS created_at
FROM range(40) t(i);
CREATE TABLE users AS
SELECT 'user-' || i AS user_id,
       'user' || i || '@example.com' AS email,
       ['Ada', 'Grace', 'Linus', 'Barbara', 'Ken', 'Margaret', 'Dennis', 'Frances'][i % 8 + 1] || ' ' || chr((65 + i % 26)::INTEGER) || '.' AS name,
       'co-' || (i % 40) AS company_id,
       ['DE', 'US', 'BR', 'IN', 'NO', 'JP'][i % 6 + 1] AS country,
       (i % 5 = 0) AS is_paying,
       (now() - INTERVAL (i % 300) DAY)::DATE AS signup_date
FROM range(500) t(i);
CREATE TABLE items AS
SELECT 'sku-' || i AS sku,
       ['Coffee', 'Tea', 'Mug', 'Grinder', 'Kettle'][i % 5 + 1] || ' #' || i AS title,
       ['drinks', 'kitchen'][i % 2 + 1] AS category,
       round(3 + i * 1.37 % 120, 2)::DECIMAL(10,2) AS price_usd
FROM range(100) t(i);
CREATE TABLE app_events (
  event_id VARCHAR PRIMARY KEY, event_type VARCHAR NOT NULL, event_time TIMESTAMP NOT NULL,
  user_id VARCHAR, device_id VARCHAR, loaded_at TIMESTAMP NOT NULL, props JSON,
  shipping STRUCT(city VARCHAR, country VARCHAR), amount_usd DECIMAL(10,2), internal_note VARCHAR);
INSERT INTO app_events
SELECT 'ev-' || i,
       ['Page View', 'Search', 'Add To Cart', 'Purchase', 'Sign Up'][CASE WHEN i % 10 < 5 THEN 1 WHEN i % 10 < 7 THEN 2 WHEN i % 10 < 9 THEN 3 ELSE 4 + (i % 20 = 19)::INTEGER END],
       date_trunc('second', now()::TIMESTAMP) - INTERVAL (i * 30) SECOND,
       CASE WHEN i % 4 = 0 THEN NULL ELSE 'user-' || (i * 7 % 500) END,
       'dev-' || (i * 13 % 800),
       date_trunc('second', now()::TIMESTAMP) - INTERVAL (i * 30) SECOND + INTERVAL 5 MINUTE,
       json_object('page', '/p/' || (i % 50), 'referrer', ['google', 'newsletter', 'direct'][i % 3 + 1],
                   'experiment', json_object('name', 'checkout-v2', 'arm', ['a', 'b'][i % 2 + 1]), 'sku', 'sku-' || (i % 100)),
       CASE WHEN i % 10 = 9 THEN {'city': ['Berlin', 'Oslo', 'São Paulo'][i % 3 + 1], 'country': ['DE', 'NO', 'BR'][i % 3 + 1]} END,
       CASE WHEN i % 10 = 9 THEN round(5 + i % 200 * 0.73, 2) END,
       'not for analytics'
FROM range(20000) t(i);
`

// SeedDemo creates the demo warehouse at path unless the file exists.
func SeedDemo(ctx context.Context, path string) (created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	db, err := sql.Open("duckdb", tmp)
	if err != nil {
		return false, err
	}
	if _, err := db.ExecContext(ctx, demoSQL); err != nil {
		db.Close()
		os.Remove(tmp)
		return false, fmt.Errorf("seed demo warehouse: %w", err)
	}
	if err := db.Close(); err != nil {
		return false, err
	}
	// A half-built file never passes for a seeded one.
	return true, os.Rename(tmp, path)
}
