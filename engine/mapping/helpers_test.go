package mapping

import (
	"math/big"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type bigInt struct{}

// exp returns 10^30, beyond int64, for the decimal slow path.
func (bigInt) exp() *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil) }

func stringArray(vals ...string) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, nil)
	return b.NewArray()
}
