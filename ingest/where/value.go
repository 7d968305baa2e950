package where

import (
	"strings"

	"github.com/valyala/fastjson"
)

// Value is a compiled value expression: what segmentation's `on` parameter
// segments by. Only a property reference is accepted
// (properties["k"] or user["k"]), which covers the breakdowns the public
// API documents; the language stays a filter language otherwise.
type Value struct {
	op operand
}

// ParseValue compiles a value expression. An empty or all-blank source
// returns (nil, nil): no segmentation. Errors are *SyntaxError.
func ParseValue(src string) (*Value, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	t := p.peek()
	if !isWord(t, "properties") && !isWord(t, "user") {
		return nil, p.errorf(t, `expected a property, e.g. properties["plan"], but found %s`, t)
	}
	op, err := p.operand("")
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errorf(t, "expected end of expression but found %s", t)
	}
	return &Value{op: op}, nil
}

// Eval returns the value for r, nil when the property is absent.
func (v *Value) Eval(r Row) *fastjson.Value { return v.op.get(r) }

// Key is the property name the expression reads.
func (v *Value) Key() string { return v.op.key }

// String returns the expression in canonical form.
func (v *Value) String() string {
	if v == nil {
		return ""
	}
	return string(v.op.appendTo(nil))
}
