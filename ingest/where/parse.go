package where

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/internal/jsonw"
)

// parser is a recursive-descent parser over the token slice; it builds the
// evaluation tree directly, so there is no separate AST to compile.
type parser struct {
	toks  []token
	i     int
	depth int
	keys  []string
}

func (p *parser) peek() token { return p.toks[p.i] } // the last token is tEOF, never passed
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errorf(t token, format string, args ...any) error {
	return &SyntaxError{Offset: t.pos, Msg: fmt.Sprintf(format, args...)}
}

func isWord(t token, w string) bool { return t.kind == tIdent && strings.EqualFold(t.text, w) }

// keyword consumes the keyword w if it is next.
func (p *parser) keyword(w string) bool {
	if isWord(p.peek(), w) {
		p.i++
		return true
	}
	return false
}

// expect consumes the punctuation s or fails naming what was found.
func (p *parser) expect(s string) error {
	if t := p.peek(); t.kind != tPunct || t.text != s {
		return p.errorf(t, "expected '%s' but found %s", s, t)
	}
	p.i++
	return nil
}

func (p *parser) or() (node, error) {
	return p.chain("or", p.and, func(n []node) node { return orNode(n) })
}
func (p *parser) and() (node, error) {
	return p.chain("and", p.unary, func(n []node) node { return andNode(n) })
}

// chain parses operand (word operand)* into one n-ary node: a long
// "a and b and c …" stays a flat list rather than a deep tree, so neither
// evaluation nor String recurses once per term.
func (p *parser) chain(word string, operand func() (node, error), mk func([]node) node) (node, error) {
	first, err := operand()
	if err != nil || !p.keyword(word) {
		return first, err
	}
	list := []node{first}
	for {
		n, err := operand()
		if err != nil {
			return nil, err
		}
		list = append(list, n)
		if !p.keyword(word) {
			return mk(list), nil
		}
	}
}

func (p *parser) unary() (node, error) {
	if p.depth++; p.depth > MaxDepth {
		return nil, p.errorf(p.peek(), "expression nested more than %d levels deep", MaxDepth)
	}
	defer func() { p.depth-- }()
	t := p.peek()
	switch {
	case p.keyword("not"):
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	case t.kind == tPunct && t.text == "(":
		p.i++
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		return n, p.expect(")")
	case isWord(t, "defined"):
		p.i++
		if err := p.expect("("); err != nil {
			return nil, err
		}
		arg := p.peek()
		if !isWord(arg, "properties") && !isWord(arg, "user") {
			return nil, p.errorf(arg, `defined() takes a property, e.g. defined(properties["name"]); found %s`, arg)
		}
		op, err := p.operand("")
		if err != nil {
			return nil, err
		}
		return definedNode{op}, p.expect(")")
	}
	return p.comparison()
}

var opKinds = map[string]opKind{"==": opEq, "!=": opNe, "<": opLt, ">": opGt, "<=": opLe, ">=": opGe}

func (p *parser) comparison() (node, error) {
	start := p.peek()
	l, err := p.operand("a condition (a comparison, defined(...), not or '(')")
	if err != nil {
		return nil, err
	}
	t := p.next()
	op, ok := opKinds[t.text]
	switch {
	case t.kind == tOp && ok:
	case isWord(t, "in"):
		op = opIn
	default:
		return nil, p.errorf(t, "expected a comparison operator (==, !=, <, >, <=, >=, in) but found %s", t)
	}
	r, err := p.operand("a property or a literal")
	if err != nil {
		return nil, err
	}
	if l.ns == "" && r.ns == "" {
		return nil, p.errorf(start, `a comparison needs a property (properties["name"]) on one side`)
	}
	if op >= opLt && op <= opGe && (l.list || r.list) {
		return nil, p.errorf(t, "%s cannot compare lists; use ==, != or in", t.text)
	}
	if op == opIn {
		return &inNode{l: l, r: r, set: newLitSet(r)}, nil
	}
	return &cmpNode{op: op, l: l, r: r}, nil
}

// operand parses a property, a scalar literal or a list of literals; what
// names the expected thing in the error message.
func (p *parser) operand(what string) (operand, error) {
	t := p.next()
	switch {
	case isWord(t, "properties"), isWord(t, "user"):
		if err := p.expect("["); err != nil {
			return operand{}, err
		}
		k := p.next()
		if k.kind != tString {
			return operand{}, p.errorf(k, "expected a quoted property name but found %s", k)
		}
		if err := p.expect("]"); err != nil {
			return operand{}, err
		}
		p.addKey(k.val)
		return operand{ns: strings.ToLower(t.text), key: k.val}, nil
	case t.kind == tPunct && t.text == "[":
		return p.list(t)
	}
	src, ok := scalar(t)
	if !ok {
		if what == "" {
			what = "a property or a literal"
		}
		return operand{}, p.errorf(t, "expected %s but found %s", what, t)
	}
	return newLiteral(t, src, false)
}

// scalar returns the canonical JSON text of a scalar literal token.
func scalar(t token) (string, bool) {
	switch {
	case t.kind == tString:
		return string(jsonw.String(nil, t.val)), true
	case t.kind == tNumber:
		return t.text, true
	case isWord(t, "true"), isWord(t, "false"), isWord(t, "null"):
		return strings.ToLower(t.text), true
	}
	return "", false
}

func (p *parser) list(open token) (operand, error) {
	var b strings.Builder
	b.WriteByte('[')
	if t := p.peek(); t.kind == tPunct && t.text == "]" {
		p.i++
		return newLiteral(open, "[]", true)
	}
	for {
		t := p.next()
		src, ok := scalar(t)
		if !ok {
			return operand{}, p.errorf(t, "expected a literal in the list but found %s", t)
		}
		b.WriteString(src)
		t = p.next()
		if t.kind != tPunct || (t.text != "," && t.text != "]") {
			return operand{}, p.errorf(t, "expected ',' or ']' but found %s", t)
		}
		if t.text == "]" {
			b.WriteByte(']')
			return newLiteral(open, b.String(), true)
		}
		b.WriteByte(',')
	}
}

func (p *parser) addKey(k string) {
	for _, have := range p.keys {
		if have == k {
			return
		}
	}
	p.keys = append(p.keys, k)
}

// newLiteral parses the canonical JSON of a literal once, at compile time,
// so evaluation compares fastjson values on both sides.
func newLiteral(t token, src string, list bool) (operand, error) {
	v, err := fastjson.Parse(src)
	if err != nil {
		return operand{}, &SyntaxError{Offset: t.pos, Msg: fmt.Sprintf("invalid literal %s", t)}
	}
	// Type() also decodes strings in place the first time it is called:
	// doing it here leaves the literal read-only, so that an Expr can be
	// evaluated from many goroutines at once.
	for _, n := range append(v.GetArray(), v) {
		if n.Type() == fastjson.TypeNumber {
			// JSON allows 1e999; a float64 does not, and it could never match.
			if _, err := strconv.ParseFloat(string(n.MarshalTo(nil)), 64); err != nil {
				return operand{}, &SyntaxError{Offset: t.pos, Msg: fmt.Sprintf("number %s out of range", n)}
			}
		}
	}
	return operand{lit: v, src: src, list: list}, nil
}
