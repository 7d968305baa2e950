package config

// The limits at the HTTP edge (docs/security.md, "HTTP edges").
const (
	// DefaultBodyMinRate is the slowest average a request body may
	// arrive at, in bytes per second, once its grace period is over: a
	// 10 MB /import at 1 KB/s still has almost three hours.
	DefaultBodyMinRate ByteSize = 1 << 10
	// DefaultIPRequestsPerSecond is the per-address request rate of the
	// endpoints a public project token opens (/track, /engage, /groups).
	DefaultIPRequestsPerSecond = 1000
	// MinMaxConnections keeps max_connections above what a handful of
	// clients with keep-alive need.
	MinMaxConnections = 16
)

// EdgeLimits are the HTTP edge's limits after defaults.
type EdgeLimits struct {
	// MaxConnections caps open client connections; 0: the server sizes
	// it from the process's open-file limit.
	MaxConnections int
	// BodyMinRate is bytes per second; 0 turns the rule off.
	BodyMinRate int64
	// IPRequestsPerSecond is per client address; 0 turns the limit off.
	IPRequestsPerSecond int
}

// Edges returns the configured edge limits with defaults filled in.
func (c *Config) Edges() EdgeLimits {
	e := EdgeLimits{MaxConnections: c.MaxConnections, BodyMinRate: int64(DefaultBodyMinRate), IPRequestsPerSecond: DefaultIPRequestsPerSecond}
	if c.BodyMinRate != nil {
		e.BodyMinRate = int64(*c.BodyMinRate)
	}
	if c.IPRequestsPerSecond != nil {
		e.IPRequestsPerSecond = *c.IPRequestsPerSecond
	}
	return e
}

func (c *Config) validateEdges() error {
	if c.MaxConnections != 0 && c.MaxConnections < MinMaxConnections {
		return bad("max_connections", "must be at least %d (or unset: sized from the open-file limit); got %d", MinMaxConnections, c.MaxConnections)
	}
	if c.IPRequestsPerSecond != nil && *c.IPRequestsPerSecond < 0 {
		return bad("ip_requests_per_second", "must be 0 (no limit) or more; got %d", *c.IPRequestsPerSecond)
	}
	return nil
}
