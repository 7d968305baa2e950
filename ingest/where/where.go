// Package where is the `where` expression language shared by raw export
// (/api/2.0/export), the profile query API (/api/2.0/engage) and
// segmentation: a boolean subset of Mixpanel's segmentation expressions.
//
//	expr       := or
//	or         := and ("or" and)*
//	and        := unary ("and" unary)*
//	unary      := "not" unary | "(" expr ")" | "defined" "(" property ")" | comparison
//	comparison := operand ("==" | "!=" | "<" | ">" | "<=" | ">=" | "in") operand
//	operand    := property | literal | "[" [literal ("," literal)*] "]"
//	property   := ("properties" | "user") "[" string "]"
//	literal    := string | number | "true" | "false" | "null"
//
// Keywords are case-insensitive; strings take "double" or 'single' quotes
// and JSON escapes; numbers use JSON syntax. `user["k"]` is an alias of
// `properties["k"]` so profile filters written for Mixpanel's engage API
// work unchanged.
//
// Semantics (as in Mixpanel's segmentation expressions):
//   - A comparison needs a property on at least one side: a comparison of
//     two literals is constant, which in a filter is always a mistake.
//   - Values of different types are never equal and never ordered, so
//     properties["n"] == "3" is false when n is the number 3. Numbers
//     compare numerically (as float64), strings bytewise (lexically).
//     Arrays are equal when their items are; objects are never equal.
//   - A missing property equals nothing: == and the orderings are false,
//     != is true (x != y is exactly not (x == y)).
//   - `a in b` is list membership when b is an array, substring search
//     when both are strings, false otherwise.
//   - `null` matches an explicit JSON null only; defined(p) is true when p
//     is present and not null, so `not defined(p)` finds missing or null.
//
// Parse compiles an expression once into a tree of small structs; Match
// then evaluates it per row without allocating.
package where

import (
	"errors"
	"fmt"
	"strings"

	"github.com/valyala/fastjson"
)

// ErrBadWhere is matched by every parse error (errors.Is), so callers can
// map any malformed expression to a 400.
var ErrBadWhere = errors.New("invalid where expression")

// SyntaxError is a parse error at a byte offset of the expression, so an
// HTTP error can point at the offending position.
type SyntaxError struct {
	Offset int    // 0-based byte offset into the expression; len(expr) for "end of expression"
	Msg    string // e.g. `expected ')' but found "and"`
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("where: position %d: %s", e.Offset, e.Msg)
}

// Unwrap makes errors.Is(err, ErrBadWhere) true for every syntax error.
func (e *SyntaxError) Unwrap() error { return ErrBadWhere }

// Row is what an expression reads: one property by name, nil when absent.
// Callers adapt their own records (an event with built-in fields, a
// profile) so that the language does not depend on any storage layout.
type Row interface {
	Get(key string) *fastjson.Value
}

// JSON is a Row over a parsed JSON object; a nil or non-object value has no
// properties. It is pointer-shaped, so converting it to Row does not allocate.
type JSON struct{ V *fastjson.Value }

// Get returns the member key of the object, or nil.
func (j JSON) Get(key string) *fastjson.Value {
	if j.V == nil || j.V.Type() != fastjson.TypeObject {
		return nil
	}
	o, _ := j.V.Object()
	return o.Get(key)
}

// Expr is a compiled expression. A nil *Expr (from an empty expression)
// matches every row. An Expr is immutable and safe for concurrent use.
type Expr struct {
	root node
	keys []string
}

// MaxDepth bounds nesting (parentheses, not, lists) so that a hostile
// expression cannot exhaust the stack.
const MaxDepth = 64

// Parse compiles src. An empty or all-blank expression returns (nil, nil),
// which matches everything. Errors are *SyntaxError.
func Parse(src string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errorf(t, "expected 'and', 'or' or end of expression but found %s", t)
	}
	return &Expr{root: root, keys: p.keys}, nil
}

// Match reports whether r satisfies the expression.
func (e *Expr) Match(r Row) bool {
	if e == nil {
		return true
	}
	return e.root.match(r)
}

// String returns the expression in canonical form (lower-case keywords,
// JSON-quoted strings, minimal spacing). Parsing it gives the same Expr.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return string(e.root.appendTo(nil))
}

// Keys lists the property names the expression reads, in order of first
// use, so a caller can skip decoding rows or columns it does not need.
func (e *Expr) Keys() []string {
	if e == nil {
		return nil
	}
	return append([]string(nil), e.keys...)
}
