package snowflake

import (
	"context"
	"time"

	"github.com/tributary-dev/tributary/connectors"
)

// LocalKind is kind: snowflake pointed at a Snowflake-protocol endpoint
// at host:port over plain HTTP — the local fake sfserver — so that the
// layers above (the run engine's Mirror rounds) test against the real
// driver and wire protocol. The user-facing kind offers no plain HTTP on
// purpose; nothing in the service uses this. feedLag replaces the
// change feed's one-second lag (0: a change is seen by the next run).
func LocalKind(host string, port int, feedLag time.Duration) connectors.Kind {
	k := Kind()
	k.Open = func(ctx context.Context, f map[string]string) (connectors.Source, error) {
		cfg, err := config(f)
		if err != nil {
			return nil, connectors.Permanent(err)
		}
		cfg.Protocol, cfg.Host, cfg.Port = "http", host, port
		cfg.MaxRetryCount = 2
		s, err := open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		s.feedLag = feedLag
		return s, nil
	}
	return k
}
