package where

import (
	"bytes"
	"cmp"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/internal/jsonw"
)

type opKind uint8

const (
	opEq opKind = iota
	opNe
	opLt // opLt…opGe are the orderings; keep them contiguous
	opGt
	opLe
	opGe
	opIn
)

var opText = [...]string{opEq: "==", opNe: "!=", opLt: "<", opGt: ">", opLe: "<=", opGe: ">=", opIn: "in"}

// node is one compiled condition. match must not allocate: it runs once
// per scanned row.
type node interface {
	match(r Row) bool
	appendTo(dst []byte) []byte
}

// operand is a property reference (ns != "") or a literal parsed at compile
// time (lit, with its canonical source text src).
type operand struct {
	ns, key string // ns is "properties" or "user"
	lit     *fastjson.Value
	src     string
	list    bool
}

func (o *operand) get(r Row) *fastjson.Value {
	if o.ns != "" {
		return r.Get(o.key)
	}
	return o.lit
}

func (o *operand) appendTo(dst []byte) []byte {
	if o.ns == "" {
		return append(dst, o.src...)
	}
	dst = append(append(dst, o.ns...), '[')
	return append(jsonw.String(dst, o.key), ']')
}

type (
	andNode     []node
	orNode      []node
	notNode     struct{ n node }
	definedNode struct{ p operand }
	cmpNode     struct {
		op   opKind
		l, r operand
	}
	inNode struct {
		l, r operand
		set  *litSet // nil unless r is a long literal list
	}
)

func (n andNode) match(r Row) bool {
	for _, c := range n {
		if !c.match(r) {
			return false
		}
	}
	return true
}

func (n orNode) match(r Row) bool {
	for _, c := range n {
		if c.match(r) {
			return true
		}
	}
	return false
}

func (n notNode) match(r Row) bool { return !n.n.match(r) }

func (n definedNode) match(r Row) bool {
	v := n.p.get(r)
	return v != nil && v.Type() != fastjson.TypeNull
}

func (n *cmpNode) match(r Row) bool {
	a, b := n.l.get(r), n.r.get(r)
	switch n.op {
	case opEq:
		return equal(a, b)
	case opNe:
		return !equal(a, b)
	}
	c, ok := order(a, b)
	if !ok {
		return false
	}
	switch n.op {
	case opLt:
		return c < 0
	case opGt:
		return c > 0
	case opLe:
		return c <= 0
	}
	return c >= 0
}

func (n *inNode) match(r Row) bool {
	a := n.l.get(r)
	if a == nil {
		return false
	}
	if n.set != nil {
		return n.set.has(a)
	}
	return contains(a, n.r.get(r))
}

// equal is == of the language: same type and same value.
func equal(a, b *fastjson.Value) bool {
	if a == nil || b == nil {
		return false
	}
	t := a.Type()
	if t != b.Type() {
		return false
	}
	switch t {
	case fastjson.TypeString:
		return bytes.Equal(a.GetStringBytes(), b.GetStringBytes())
	case fastjson.TypeNumber:
		x, err1 := a.Float64()
		y, err2 := b.Float64()
		return err1 == nil && err2 == nil && x == y
	case fastjson.TypeTrue, fastjson.TypeFalse, fastjson.TypeNull:
		return true
	case fastjson.TypeArray:
		x, y := a.GetArray(), b.GetArray()
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return false // objects are never equal
}

// order compares two numbers or two strings; ok is false for anything
// else, which makes every ordering false.
func order(a, b *fastjson.Value) (c int, ok bool) {
	if a == nil || b == nil {
		return 0, false
	}
	t := a.Type()
	if t != b.Type() {
		return 0, false
	}
	switch t {
	case fastjson.TypeString:
		return bytes.Compare(a.GetStringBytes(), b.GetStringBytes()), true
	case fastjson.TypeNumber:
		x, err1 := a.Float64()
		y, err2 := b.Float64()
		return cmp.Compare(x, y), err1 == nil && err2 == nil
	}
	return 0, false
}

// contains is `a in b`: membership in an array, or a substring of a string.
func contains(a, b *fastjson.Value) bool {
	if b == nil {
		return false
	}
	switch b.Type() {
	case fastjson.TypeArray:
		for _, item := range b.GetArray() {
			if equal(a, item) {
				return true
			}
		}
	case fastjson.TypeString:
		return a.Type() == fastjson.TypeString && bytes.Contains(b.GetStringBytes(), a.GetStringBytes())
	}
	return false
}

// litSet answers `x in [literal, …]` with one hash lookup instead of a scan,
// for lists long enough for that to matter (an in-list of account ids).
type litSet struct {
	strs          map[string]struct{}
	nums          map[float64]struct{}
	yes, no, null bool
}

const minSetLen = 8

func newLitSet(list operand) *litSet {
	if !list.list || len(list.lit.GetArray()) < minSetLen {
		return nil
	}
	s := &litSet{strs: map[string]struct{}{}, nums: map[float64]struct{}{}}
	for _, v := range list.lit.GetArray() {
		switch v.Type() {
		case fastjson.TypeString:
			s.strs[string(v.GetStringBytes())] = struct{}{}
		case fastjson.TypeNumber:
			s.nums[v.GetFloat64()] = struct{}{}
		case fastjson.TypeTrue:
			s.yes = true
		case fastjson.TypeFalse:
			s.no = true
		case fastjson.TypeNull:
			s.null = true
		}
	}
	return s
}

func (s *litSet) has(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeString:
		_, ok := s.strs[string(v.GetStringBytes())] // no allocation: the compiler sees the lookup
		return ok
	case fastjson.TypeNumber:
		f, err := v.Float64()
		_, ok := s.nums[f]
		return ok && err == nil
	case fastjson.TypeTrue:
		return s.yes
	case fastjson.TypeFalse:
		return s.no
	case fastjson.TypeNull:
		return s.null
	}
	return false // literal lists hold only scalars
}

func (n andNode) appendTo(dst []byte) []byte { return appendJoined(dst, n, " and ") }
func (n orNode) appendTo(dst []byte) []byte  { return appendJoined(dst, n, " or ") }

func appendJoined(dst []byte, list []node, sep string) []byte {
	for i, c := range list {
		if i > 0 {
			dst = append(dst, sep...)
		}
		dst = appendGrouped(dst, c)
	}
	return dst
}

// appendGrouped parenthesises a nested and/or so that String keeps the
// tree's shape whatever the precedence.
func appendGrouped(dst []byte, n node) []byte {
	switch n.(type) {
	case andNode, orNode:
		return append(n.appendTo(append(dst, '(')), ')')
	}
	return n.appendTo(dst)
}

func (n notNode) appendTo(dst []byte) []byte { return appendGrouped(append(dst, "not "...), n.n) }
func (n definedNode) appendTo(dst []byte) []byte {
	return append(n.p.appendTo(append(dst, "defined("...)), ')')
}
func (n *cmpNode) appendTo(dst []byte) []byte { return appendBinary(dst, &n.l, n.op, &n.r) }
func (n *inNode) appendTo(dst []byte) []byte  { return appendBinary(dst, &n.l, opIn, &n.r) }

func appendBinary(dst []byte, l *operand, op opKind, r *operand) []byte {
	dst = append(l.appendTo(dst), ' ')
	dst = append(append(dst, opText[op]...), ' ')
	return r.appendTo(dst)
}
