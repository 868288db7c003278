package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// This file builds the package-private gonja environment that mirrors the
// Jinja environment transformers compiles chat templates with:
//
//	ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
//	    extensions=[AssistantTracker, jinja2.ext.loopcontrols])
//	env.filters["tojson"] = tojson   # json.dumps(x, ensure_ascii=False, ...)
//	env.globals["raise_exception"], env.globals["strftime_now"]
//
// gonja's own globals (DefaultConfig, builtins.Filters, ...) are never
// modified: newEnvironment copies the built-in sets and replaces entries in
// the copies. Each Render adds its per-call functions (raise_exception,
// strftime_now) to the data context, so nothing mutable is shared between
// renders.

// newConfig returns the lexer/parser settings of transformers' environment.
func newConfig() *config.Config {
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	cfg.KeepTrailingNewline = false // Jinja's default, which HF keeps
	return cfg
}

// sharedEnv is built once; it is never mutated after init, and every set in
// it guards its map with its own mutex, so templates may share it.
var sharedEnv = newEnvironment()

func newEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	must(filters.Replace("tojson", filterToJSON))
	must(filters.Replace("items", filterItems))
	must(filters.Replace("trim", filterTrim))

	tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
	must(tests.Replace("false", testFalse))
	must(tests.Replace("true", testTrue))

	structures := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
	must(structures.Register("generation", generationParser))

	ctx := exec.NewContext(map[string]any{}).Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("range", rangeFunction)

	return &exec.Environment{
		Filters:           filters,
		Tests:             tests,
		ControlStructures: structures,
		Context:           ctx,
		Methods: exec.Methods{
			Bool:  builtins.Methods.Bool,
			Int:   builtins.Methods.Int,
			Float: builtins.Methods.Float,
			List:  builtins.Methods.List,
			Str:   strMethods(),
			Dict:  dictMethods(),
		},
	}
}

func must(err error) {
	if err != nil {
		panic("chat: building the template environment: " + err.Error())
	}
}

// filterToJSON is transformers' tojson:
//
//	def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
//	    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
//	                      separators=separators, sort_keys=sort_keys)
//
// Positional arguments bind in that order too (so tojson(4), unlike in stock
// Jinja, sets ensure_ascii, not indent).
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(params.Args) > len(names) {
		return exec.AsValue(errors.New("tojson: too many positional arguments"))
	}
	args := map[string]*exec.Value{}
	for i, v := range params.Args {
		args[names[i]] = v
	}
	for name, v := range params.KwArgs {
		if _, dup := args[name]; dup {
			return exec.AsValue(fmt.Errorf("tojson: got multiple values for argument %q", name))
		}
		args[name] = v
	}
	var opts pyJSONOptions
	for name, v := range args {
		switch name {
		case "ensure_ascii":
			opts.ensureASCII = v.IsTrue()
		case "indent":
			if err := setIndent(&opts, v); err != nil {
				return exec.AsValue(err)
			}
		case "separators":
			if v.IsNil() {
				continue
			}
			if !v.IsList() || v.Len() != 2 {
				return exec.AsValue(errors.New("tojson: separators must be a pair of strings"))
			}
			opts.itemSep, opts.keySep = v.Index(0).String(), v.Index(1).String()
		case "sort_keys":
			opts.sortKeys = v.IsTrue()
		default:
			return exec.AsValue(fmt.Errorf("tojson: unexpected keyword argument %q", name))
		}
	}
	s, err := pyJSON(in.Interface(), opts)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(s)
}

func setIndent(opts *pyJSONOptions, v *exec.Value) error {
	switch {
	case v.IsNil():
		opts.indent = nil
	case v.IsInteger():
		s := strings.Repeat(" ", max(v.Integer(), 0))
		opts.indent = &s
	case v.IsString():
		s := v.String()
		opts.indent = &s
	default:
		return fmt.Errorf("tojson: indent must be an int or a string, not %s", v.String())
	}
	return nil
}

// filterItems is Jinja's items filter, keeping the order of ordered dicts
// (gonja's own returns nothing for them).
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return exec.AsValue(errors.New("items takes no arguments"))
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if !in.IsDict() {
		return exec.AsValue(fmt.Errorf("items: %s is not a mapping", in.String()))
	}
	return exec.AsValue(orderedItems(in))
}

// orderedItems returns [key, value] pairs in the dict's order (sorted keys
// for plain Go maps, which have none).
func orderedItems(in *exec.Value) []any {
	out := []any{}
	in.Iterate(func(_, _ int, key, value *exec.Value) bool {
		out = append(out, []any{key.Interface(), value.Interface()})
		return true
	}, func() {})
	return out
}

// filterTrim is Jinja's trim: str(value).strip(chars), Python whitespace.
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	chars := params.GetKeywordArgument("chars", nil)
	if len(params.Args) > 0 {
		chars = params.Args[0]
	}
	return exec.AsValue(pyStrip(pyStr(in), chars, true, true))
}

// testFalse and testTrue are Jinja's `is false` / `is true`: identity with
// the booleans, so undefined, none, 0 and "" are neither (gonja's own treat
// every non-bool as false).
func testFalse(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return in.IsBool() && !in.Bool(), nil
}

func testTrue(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return in.IsBool() && in.Bool(), nil
}

// rangeFunction is Python's range as a list. gonja's own returns a channel
// fed by a goroutine, which leaks when a loop breaks early.
func rangeFunction(params *exec.VarArgs) ([]int, error) {
	args := make([]int, len(params.Args))
	for i, a := range params.Args {
		if !a.IsInteger() {
			return nil, fmt.Errorf("range: %s is not an integer", a.String())
		}
		args[i] = a.Integer()
	}
	start, stop, step := 0, 0, 1
	switch len(args) {
	case 1:
		stop = args[0]
	case 2:
		start, stop = args[0], args[1]
	case 3:
		start, stop, step = args[0], args[1], args[2]
	default:
		return nil, errors.New("range expects 1 to 3 integer arguments")
	}
	if step == 0 {
		return nil, errors.New("range: step must not be zero")
	}
	const maxRange = 1 << 20 // the sandbox's MAX_RANGE is 100000; be generous but bounded
	out := []int{}
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) == maxRange {
			return nil, errors.New("range too big")
		}
		out = append(out, i)
	}
	return out, nil
}

// pyStr is Python's str() of a template value, as far as chat templates
// need it.
func pyStr(v *exec.Value) string {
	switch {
	case v.IsNil():
		return "None"
	case v.IsFloat():
		return pyFloat(v.Float(), false)
	}
	return v.String()
}

// pyWhitespace reports whether r is whitespace for Python's str.strip and
// str.split (str.isspace), which includes the separators \x1c-\x1f that Go's
// unicode.IsSpace leaves out.
func pyWhitespace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is str.strip/lstrip/rstrip: chars nil or None strips whitespace,
// otherwise any of the characters of chars.
func pyStrip(s string, chars *exec.Value, left, right bool) string {
	cut := pyWhitespace
	if chars != nil && !chars.IsNil() {
		set := chars.String()
		cut = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s
}

// pySplit is str.split(sep, maxsplit) (rsplit when fromRight): with no sep it
// splits on runs of whitespace and drops empty strings.
func pySplit(s string, sep *exec.Value, maxsplit int, fromRight bool) ([]string, error) {
	if sep == nil || sep.IsNil() {
		fields := strings.FieldsFunc(s, pyWhitespace)
		if maxsplit < 0 || maxsplit >= len(fields)-1 {
			return fields, nil
		}
		// Re-split keeping the remainder intact, as Python does.
		out := []string{}
		rest := s
		if !fromRight {
			rest = strings.TrimLeftFunc(rest, pyWhitespace)
			for range maxsplit {
				i := strings.IndexFunc(rest, pyWhitespace)
				out = append(out, rest[:i])
				rest = strings.TrimLeftFunc(rest[i:], pyWhitespace)
			}
			return append(out, rest), nil
		}
		rest = strings.TrimRightFunc(rest, pyWhitespace)
		for range maxsplit {
			i := strings.LastIndexFunc(rest, pyWhitespace)
			out = append([]string{rest[i+1:]}, out...)
			rest = strings.TrimRightFunc(rest[:i], pyWhitespace)
		}
		return append([]string{rest}, out...), nil
	}
	d := sep.String()
	if d == "" {
		return nil, errors.New("empty separator")
	}
	if !fromRight {
		return strings.SplitN(s, d, splitN(maxsplit)), nil
	}
	if maxsplit < 0 {
		return strings.Split(s, d), nil
	}
	out := []string{}
	rest := s
	for range maxsplit {
		i := strings.LastIndex(rest, d)
		if i < 0 {
			break
		}
		out = append([]string{rest[i+len(d):]}, out...)
		rest = rest[:i]
	}
	return append([]string{rest}, out...), nil
}

func splitN(maxsplit int) int {
	if maxsplit < 0 {
		return -1
	}
	return maxsplit + 1
}

// strMethodNames are the str methods gonja v2.9.1 implements; strMethods
// copies them into a private set and replaces the ones whose defaults differ
// from Python (gonja strips and splits on ' ' instead of any whitespace).
var strMethodNames = []string{
	"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith",
	"expandtabs", "find", "format", "format_map", "isalnum", "isalpha", "isascii",
	"isdecimal", "isdigit", "islower", "isnumeric", "isprintable", "isspace",
	"istitle", "isupper", "join", "ljust", "lower", "lstrip", "partition",
	"removeprefix", "removesuffix", "replace", "rfind", "rjust", "rpartition",
	"rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase",
	"title", "upper", "zfill",
}

func strMethods() *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range strMethodNames {
		if fn, ok := builtins.Methods.Str.Get(name); ok {
			m[name] = fn
		}
	}
	strip := func(left, right bool) exec.Method[string] {
		return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
			if len(args.Args) > 1 || len(args.KwArgs) > 0 {
				return nil, errors.New("strip takes at most one argument")
			}
			return pyStrip(self, args.First(), left, right), nil
		}
	}
	m["strip"] = strip(true, true)
	m["lstrip"] = strip(true, false)
	m["rstrip"] = strip(false, true)
	split := func(fromRight bool) exec.Method[string] {
		return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
			sep := args.GetKeywordArgument("sep", nil)
			maxsplit := args.GetKeywordArgument("maxsplit", -1)
			if len(args.Args) > 0 {
				sep = args.Args[0]
			}
			if len(args.Args) > 1 {
				maxsplit = args.Args[1]
			}
			if len(args.Args) > 2 {
				return nil, errors.New("split takes at most two arguments")
			}
			parts, err := pySplit(self, sep, maxsplit.Integer(), fromRight)
			if err != nil {
				return nil, err
			}
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out, nil
		}
	}
	m["split"] = split(false)
	m["rsplit"] = split(true)
	return exec.NewMethodSet(m)
}

// dictMethods are the dict methods templates call, working on the ordered
// dict itself (gonja's own convert it to a Go map first, which loses the
// key order and turns nested dicts into maps).
func dictMethods() *exec.MethodSet[map[string]any] {
	m := map[string]exec.Method[map[string]any]{}
	for _, name := range []string{"pop", "setdefault", "update", "copy", "clear"} {
		if fn, ok := builtins.Methods.Dict.Get(name); ok {
			m[name] = fn
		}
	}
	noArgs := func(name string, args *exec.VarArgs) error {
		if len(args.Args) > 0 || len(args.KwArgs) > 0 {
			return fmt.Errorf("%s() takes no arguments", name)
		}
		return nil
	}
	m["items"] = func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if err := noArgs("items", args); err != nil {
			return nil, err
		}
		return orderedItems(self), nil
	}
	m["keys"] = func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if err := noArgs("keys", args); err != nil {
			return nil, err
		}
		out := []any{}
		self.Iterate(func(_, _ int, key, _ *exec.Value) bool {
			out = append(out, key.Interface())
			return true
		}, func() {})
		return out, nil
	}
	m["values"] = func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if err := noArgs("values", args); err != nil {
			return nil, err
		}
		out := []any{}
		self.Iterate(func(_, _ int, _, value *exec.Value) bool {
			out = append(out, value.Interface())
			return true
		}, func() {})
		return out, nil
	}
	m["get"] = func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) < 1 || len(args.Args) > 2 {
			return nil, errors.New("get() takes 1 or 2 arguments")
		}
		if v, ok := self.GetItem(args.Args[0].Interface()); ok {
			return v.Interface(), nil
		}
		if len(args.Args) == 2 {
			return args.Args[1].Interface(), nil
		}
		return nil, nil
	}
	return exec.NewMethodSet(m)
}

// generationControlStructure is transformers' {% generation %} block
// (AssistantTracker): it marks assistant text for return_assistant_tokens_mask
// and renders its body unchanged, which is all a renderer has to do.
type generationControlStructure struct {
	location *tokens.Token
	wrapper  *nodes.Wrapper
}

func (g *generationControlStructure) Position() *tokens.Token { return g.location }

func (g *generationControlStructure) String() string {
	return fmt.Sprintf("GenerationControlStructure(Line=%d Col=%d)", g.location.Line, g.location.Col)
}

func (g *generationControlStructure) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return r.ExecuteWrapper(g.wrapper)
}

func generationParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	g := &generationControlStructure{location: p.Current()}
	if !args.End() {
		return nil, args.Error("generation takes no arguments", nil)
	}
	wrapper, endargs, err := p.WrapUntil("endgeneration")
	if err != nil {
		return nil, err
	}
	if !endargs.End() {
		return nil, endargs.Error("endgeneration takes no arguments", nil)
	}
	g.wrapper = wrapper
	return g, nil
}

// strftime formats t with Python's time.strftime directives (the C locale's
// names). Unknown directives are kept as written, as glibc does.
func strftime(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			fmt.Fprintf(&b, "%d", wd)
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday()))
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
