package export

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/valyala/fastjson"
)

// Filter is a parsed `where` expression (a subset of the segmentation
// expression language: properties["k"] compared with == or != to a literal,
// joined by and/or/not with parentheses).
type Filter interface {
	Match(r *Row) bool
}

// Row is what a filter sees of one event.
type Row struct {
	Name, DistinctID, InsertID string
	TimeMs                     int64
	Props                      *fastjson.Value // nil until parsed
}

// ErrBadWhere wraps every parse error.
var ErrBadWhere = errors.New("invalid where expression")

// ParseWhere parses expr; an empty expression matches everything (nil Filter).
func ParseWhere(expr string) (Filter, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	p := &parser{toks: nil}
	if err := p.lex(expr); err != nil {
		return nil, err
	}
	f, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("%w: unexpected %q", ErrBadWhere, p.toks[p.pos].text)
	}
	return f, nil
}

type tokKind int

const (
	tIdent tokKind = iota
	tString
	tNumber
	tOp // == != ( ) [ ]
)

type token struct {
	kind tokKind
	text string
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) lex(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'':
			j := i + 1
			var b strings.Builder
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return fmt.Errorf("%w: unterminated string at offset %d", ErrBadWhere, i)
			}
			p.toks = append(p.toks, token{tString, b.String()})
			i = j + 1
		case strings.HasPrefix(s[i:], "==") || strings.HasPrefix(s[i:], "!="):
			p.toks = append(p.toks, token{tOp, s[i : i+2]})
			i += 2
		case strings.ContainsRune("()[]", rune(c)):
			p.toks = append(p.toks, token{tOp, s[i : i+1]})
			i++
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E' || s[j] == '+' || s[j] == '-' || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			p.toks = append(p.toks, token{tNumber, s[i:j]})
			i = j
		case unicode.IsLetter(rune(c)) || c == '_' || c == '$':
			j := i + 1
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_' || s[j] == '$') {
				j++
			}
			p.toks = append(p.toks, token{tIdent, s[i:j]})
			i = j
		default:
			return fmt.Errorf("%w: unexpected character %q at offset %d", ErrBadWhere, c, i)
		}
	}
	return nil
}

func (p *parser) peek() (token, bool) {
	if p.pos < len(p.toks) {
		return p.toks[p.pos], true
	}
	return token{}, false
}

func (p *parser) keyword(word string) bool {
	t, ok := p.peek()
	if ok && t.kind == tIdent && strings.EqualFold(t.text, word) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) op(o string) bool {
	t, ok := p.peek()
	if ok && t.kind == tOp && t.text == o {
		p.pos++
		return true
	}
	return false
}

func (p *parser) or() (Filter, error) {
	l, err := p.and()
	for err == nil && p.keyword("or") {
		var r Filter
		if r, err = p.and(); err == nil {
			l = orF{l, r}
		}
	}
	return l, err
}

func (p *parser) and() (Filter, error) {
	l, err := p.unary()
	for err == nil && p.keyword("and") {
		var r Filter
		if r, err = p.unary(); err == nil {
			l = andF{l, r}
		}
	}
	return l, err
}

func (p *parser) unary() (Filter, error) {
	if p.keyword("not") {
		f, err := p.unary()
		return notF{f}, err
	}
	if p.op("(") {
		f, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.op(")") {
			return nil, fmt.Errorf("%w: missing )", ErrBadWhere)
		}
		return f, nil
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	neg := false
	switch {
	case p.op("=="):
	case p.op("!="):
		neg = true
	default:
		return nil, fmt.Errorf("%w: expected == or != after %s", ErrBadWhere, l)
	}
	r, err := p.operand()
	if err != nil {
		return nil, err
	}
	if l.prop == nil && r.prop == nil {
		return nil, fmt.Errorf("%w: a comparison needs properties[\"name\"] on one side", ErrBadWhere)
	}
	if l.prop == nil {
		l, r = r, l
	}
	return cmpF{prop: *l.prop, lit: r.lit, neg: neg}, nil
}

// operand is either properties["k"] or a literal.
type operand struct {
	prop *string
	lit  literal
}

func (o operand) String() string {
	if o.prop != nil {
		return fmt.Sprintf("properties[%q]", *o.prop)
	}
	return o.lit.raw
}

type literal struct {
	raw   string
	str   *string
	num   *float64
	boolv *bool
}

func (p *parser) operand() (operand, error) {
	t, ok := p.peek()
	if !ok {
		return operand{}, fmt.Errorf("%w: unexpected end of expression", ErrBadWhere)
	}
	p.pos++
	switch t.kind {
	case tString:
		s := t.text
		return operand{lit: literal{raw: strconv.Quote(s), str: &s}}, nil
	case tNumber:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return operand{}, fmt.Errorf("%w: bad number %q", ErrBadWhere, t.text)
		}
		return operand{lit: literal{raw: t.text, num: &f}}, nil
	case tIdent:
		switch strings.ToLower(t.text) {
		case "true", "false":
			b := strings.EqualFold(t.text, "true")
			return operand{lit: literal{raw: t.text, boolv: &b}}, nil
		case "properties":
			if !p.op("[") {
				return operand{}, fmt.Errorf("%w: expected [ after properties", ErrBadWhere)
			}
			k, ok := p.peek()
			if !ok || k.kind != tString {
				return operand{}, fmt.Errorf("%w: expected a quoted property name", ErrBadWhere)
			}
			p.pos++
			if !p.op("]") {
				return operand{}, fmt.Errorf("%w: expected ]", ErrBadWhere)
			}
			name := k.text
			return operand{prop: &name}, nil
		}
	}
	return operand{}, fmt.Errorf("%w: unexpected %q", ErrBadWhere, t.text)
}

type andF struct{ l, r Filter }
type orF struct{ l, r Filter }
type notF struct{ f Filter }
type cmpF struct {
	prop string
	lit  literal
	neg  bool
}

func (f andF) Match(r *Row) bool { return f.l.Match(r) && f.r.Match(r) }
func (f orF) Match(r *Row) bool  { return f.l.Match(r) || f.r.Match(r) }
func (f notF) Match(r *Row) bool { return !f.f.Match(r) }

// Match compares a property to the literal. A missing property equals
// nothing, so `!=` matches it — as in the segmentation language.
func (f cmpF) Match(r *Row) bool { return f.equal(r) != f.neg }

func (f cmpF) equal(r *Row) bool {
	switch f.prop {
	case "distinct_id":
		return f.lit.str != nil && *f.lit.str == r.DistinctID
	case "$insert_id":
		return f.lit.str != nil && r.InsertID != "" && *f.lit.str == r.InsertID
	case "time":
		return f.lit.num != nil && *f.lit.num == float64(r.TimeMs/1000)
	}
	if r.Props == nil {
		return false
	}
	v := r.Props.Get(f.prop)
	if v == nil {
		return false
	}
	switch {
	case f.lit.str != nil:
		b, err := v.StringBytes()
		return err == nil && string(b) == *f.lit.str
	case f.lit.num != nil:
		n, err := v.Float64()
		return err == nil && n == *f.lit.num
	case f.lit.boolv != nil:
		b, err := v.Bool()
		return err == nil && b == *f.lit.boolv
	}
	return false
}
