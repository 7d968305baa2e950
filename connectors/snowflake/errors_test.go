package snowflake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	sf "github.com/snowflakedb/gosnowflake"

	"github.com/tributary-dev/tributary/connectors"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err       error
		permanent bool
		notFound  bool
	}{
		{&sf.SnowflakeError{Number: 390100, SQLState: "08004", Message: "Incorrect username or password was specified."}, true, false},
		{&sf.SnowflakeError{Number: 390144, SQLState: "08004", Message: "JWT token is invalid."}, true, false},
		{&sf.SnowflakeError{Number: sf.ErrCodeFailedToConnect, SQLState: "08004"}, true, false},
		{&sf.SnowflakeError{Number: 2003, SQLState: "42S02", Message: "Object does not exist or not authorized."}, true, true},
		{&sf.SnowflakeError{Number: 904, SQLState: "42000", Message: "invalid identifier 'X'"}, true, true},
		{&sf.SnowflakeError{Number: 3001, SQLState: "42501", Message: "Insufficient privileges"}, true, false},
		{&sf.SnowflakeError{Number: 606, SQLState: "57P03", Message: "No active warehouse selected"}, true, false},
		{&sf.SnowflakeError{Number: 1003, SQLState: "42000", Message: "syntax error"}, true, false},
		{&sf.SnowflakeError{Number: sf.ErrCodeServiceUnavailable, SQLState: "08001"}, false, false},
		{&sf.SnowflakeError{Number: sf.ErrFailedToPostQuery, SQLState: "08006"}, false, false},
		{&sf.SnowflakeError{Number: 630, SQLState: "57014", Message: "Statement reached its statement or warehouse timeout"}, false, false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false, false},
		{fmt.Errorf("wrapped: %w", &sf.SnowflakeError{Number: 2003, SQLState: "42S02"}), true, true},
	}
	for _, c := range cases {
		err := classify(context.Background(), "read t", c.err)
		if connectors.IsPermanent(err) != c.permanent || errors.Is(err, connectors.ErrNotFound) != c.notFound {
			t.Errorf("%v: permanent=%v notFound=%v, want %v %v", c.err, connectors.IsPermanent(err), errors.Is(err, connectors.ErrNotFound), c.permanent, c.notFound)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := classify(ctx, "read t", &sf.SnowflakeError{Number: 604, Message: "SQL execution canceled"})
	if !errors.Is(err, context.Canceled) || connectors.IsPermanent(err) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
