package metal

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// These tests run everywhere (no Mac needed). They check the messages table of api.go, which
// is the whole list of what the darwin binding sends, against the rows of Apple's metal-cpp
// headers in testdata/api.tsv, the enum values of api.go against testdata/enums.txt, and the
// darwin sources against the table: every selector they register comes from it and every send
// passes as many arguments as it says.

// apiRow is one row of testdata/api.tsv.
type apiRow struct{ class, method, returns, params, selector string }

func readAPI(t *testing.T) map[[2]string][]apiRow {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "api.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[[2]string][]apiRow{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") || sc.Text() == "" {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		if len(c) != 6 {
			t.Fatalf("testdata/api.tsv: %d columns in %q", len(c), sc.Text())
		}
		r := apiRow{class: c[0], method: c[1], returns: c[2], params: c[3], selector: c[4]}
		rows[[2]string{r.class, r.selector}] = append(rows[[2]string{r.class, r.selector}], r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// enumType is one enum or option set of testdata/enums.txt: its underlying type and values.
type enumType struct {
	underlying string
	values     map[string]uint64
}

func readEnums(t *testing.T) map[string]enumType {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "enums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	enums := map[string]enumType{}
	var cur enumType
	next := uint64(0)
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
		case !strings.HasPrefix(line, " "):
			// MTL::ResourceOptions (options, NS::UInteger) [Metal/MTLResource.hpp]
			name, rest, _ := strings.Cut(line, " (")
			_, under, _ := strings.Cut(rest, ", ")
			under, _, _ = strings.Cut(under, ")")
			cur, next = enumType{underlying: under, values: map[string]uint64{}}, 0
			enums[name] = cur
		default:
			member, expr, hasValue := strings.Cut(strings.TrimSpace(line), " = ")
			v := next
			if hasValue {
				if v, err = evalEnum(expr, cur.values); err != nil {
					t.Fatalf("testdata/enums.txt: %s: %v", member, err)
				}
			}
			cur.values[member], next = v, v+1
		}
	}
	return enums
}

// evalEnum evaluates the value expressions enums.txt holds: a number, a << b, or an earlier name.
func evalEnum(expr string, known map[string]uint64) (uint64, error) {
	expr = strings.TrimSpace(expr)
	if a, b, ok := strings.Cut(expr, "<<"); ok {
		x, err := evalEnum(a, known)
		if err != nil {
			return 0, err
		}
		y, err := evalEnum(b, known)
		return x << y, err
	}
	if v, err := strconv.ParseUint(expr, 0, 64); err == nil {
		return v, nil
	}
	if v, ok := known[expr]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("cannot evaluate %q", expr)
}

// integerTypes are the typedefs metal-cpp passes in one integer register.
var integerTypes = map[string]kind{
	"NS::UInteger": kindUInteger, "UInteger": kindUInteger, "uint64_t": kindUInteger,
	"MTL::GPUAddress": kindUInteger, // using GPUAddress = uint64_t (MTLGPUAddress)
	"NS::Integer":     kindInteger, "Integer": kindInteger,
}

// cppKind returns the kind a metal-cpp C++ type crosses objc_msgSend as.
func cppKind(typ string, enums map[string]enumType) (kind, error) {
	t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(typ), "const "))
	switch {
	case t == "void":
		return kindVoid, nil
	case t == "SEL":
		return kindSelector, nil
	case t == "bool":
		return kindBool, nil
	case t == "MTL::Size":
		return kindSize, nil
	case strings.HasSuffix(t, "**"): // an out-parameter: NS::Error**
		return kindPointer, nil
	case strings.HasSuffix(t, "*"):
		if base := strings.TrimSpace(strings.TrimSuffix(t, "*")); base == "void" || base == "char" {
			return kindPointer, nil
		}
		return kindObject, nil // MTL::Buffer*, NS::String*, and NS::Object's _Class* and _Object*
	}
	if k, ok := integerTypes[t]; ok {
		return k, nil
	}
	for _, name := range []string{t, "NS::" + t} { // Foundation's own headers drop NS::
		if e, ok := enums[name]; ok {
			return cppKind(e.underlying, enums)
		}
	}
	return 0, fmt.Errorf("no kind known for C++ type %q", typ)
}

// cppParams splits a row's parameters into types, dropping the receiver that NS::Object's static
// helpers take as their first parameter (respondsToSelector(const void* pObj, SEL), alloc(const
// void* pClass)): a message's receiver is not one of its arguments.
func cppParams(r apiRow) []string {
	if r.params == "" {
		return nil
	}
	var types []string
	for i, p := range strings.Split(r.params, ", ") {
		cut := strings.LastIndexAny(p, " *")
		typ, name := p[:cut+1], p[cut+1:]
		if i == 0 && r.class == "NS::Object" && slices.Contains([]string{"pObj", "pClass", "pClassName"}, name) {
			continue
		}
		types = append(types, typ)
	}
	return types
}

// checkMessage checks one message against metal-cpp: the selector exists for the class, takes as
// many arguments as it has colons, and one of the class's rows for it has parameters and a
// result of the message's kinds.
func checkMessage(m message, api map[[2]string][]apiRow, enums map[string]enumType) error {
	rows := api[[2]string{m.class, m.selector}]
	if len(rows) == 0 {
		return fmt.Errorf("%s %s: no such selector in metal-cpp's headers", m.class, m.selector)
	}
	if colons := strings.Count(m.selector, ":"); len(m.args) != colons {
		return fmt.Errorf("%s %s: %d arguments for %d colons", m.class, m.selector, len(m.args), colons)
	}
	var mismatches []string
	for _, r := range rows {
		var got []kind
		var errs []string
		for _, p := range cppParams(r) {
			k, err := cppKind(p, enums)
			if err != nil {
				errs = append(errs, err.Error())
			}
			got = append(got, k)
		}
		res, err := cppKind(r.returns, enums)
		if err != nil {
			errs = append(errs, err.Error())
		}
		if len(errs) == 0 && slices.Equal(got, m.args) && res == m.result {
			return nil
		}
		mismatches = append(mismatches, fmt.Sprintf("metal-cpp has %s %s(%s) → %v %v, tfd sends %v → %v %s",
			r.returns, r.method, r.params, got, res, m.args, m.result, strings.Join(errs, "; ")))
	}
	return fmt.Errorf("%s %s: %s", m.class, m.selector, strings.Join(mismatches, " | "))
}

func TestMessagesMatchMetalCpp(t *testing.T) {
	api, enums := readAPI(t), readEnums(t)
	for _, m := range messages {
		if err := checkMessage(m, api, enums); err != nil {
			t.Error(err)
		}
	}
	// A selector two classes send must take the same arguments from both: the darwin binding
	// registers one selector for both (commit).
	for i, a := range messages {
		for _, b := range messages[i+1:] {
			if a.selector == b.selector && (!slices.Equal(a.args, b.args) || a.result != b.result) {
				t.Errorf("%s is sent to %s and %s with different kinds", a.selector, a.class, b.class)
			}
		}
	}
}

// TestCheckMessageCatchesMistakes shows the check failing on wrong messages.
func TestCheckMessageCatchesMistakes(t *testing.T) {
	api, enums := readAPI(t), readEnums(t)
	for _, m := range []message{
		{"newBufferWithLength:", "MTL::Device", []kind{kindUInteger}, kindObject},                                               // no such selector
		{"setBuffer:offset:atIndex:", "MTL::Buffer", []kind{kindObject, kindUInteger, kindUInteger}, kindVoid},                  // wrong class
		{"setBuffer:offset:atIndex:", "MTL::ComputeCommandEncoder", []kind{kindObject, kindUInteger}, kindVoid},                 // an argument short
		{"setBuffer:offset:atIndex:", "MTL::ComputeCommandEncoder", []kind{kindObject, kindBool, kindUInteger}, kindVoid},       // BOOL for NSUInteger
		{"dispatchThreadgroups:threadsPerThreadgroup:", "MTL::ComputeCommandEncoder", []kind{kindUInteger, kindSize}, kindVoid}, // MTLSize as an integer
		{"setBytes:length:atIndex:", "MTL::ComputeCommandEncoder", []kind{kindObject, kindUInteger, kindUInteger}, kindVoid},    // object for const void*
		{"setMathMode:", "MTL::CompileOptions", []kind{kindUInteger}, kindVoid},                                                 // MTLMathMode is an NSInteger
		{"hasUnifiedMemory", "MTL::Device", nil, kindUInteger},                                                                  // the result is a BOOL
		{"commit", "MTL::CommandBuffer", []kind{kindObject}, kindVoid},                                                          // an argument without a colon
	} {
		if err := checkMessage(m, api, enums); err == nil {
			t.Errorf("%s %s %v → %v passed the check", m.class, m.selector, m.args, m.result)
		} else {
			t.Logf("caught: %v", err)
		}
	}
}

// TestTestdataHoldsOnlyRowsTfdUses keeps testdata/api.tsv to the rows of the messages table.
func TestTestdataHoldsOnlyRowsTfdUses(t *testing.T) {
	for key := range readAPI(t) {
		if !slices.ContainsFunc(messages, func(m message) bool { return m.class == key[0] && m.selector == key[1] }) {
			t.Errorf("testdata/api.tsv has %s %s, which tfd does not send", key[0], key[1])
		}
	}
}

func TestEnumValuesMatchMetalCpp(t *testing.T) {
	enums := readEnums(t)
	for _, e := range []struct {
		typ, name string
		value     uint64
	}{
		{"MTL::ResourceOptions", "ResourceCPUCacheModeDefaultCache", uint64(resourceCPUCacheModeDefaultCache)},
		{"MTL::ResourceOptions", "ResourceStorageModeShared", uint64(resourceStorageModeShared)},
		{"MTL::ResourceOptions", "ResourceHazardTrackingModeDefault", uint64(resourceHazardTrackingModeDefault)},
		{"MTL::StorageMode", "StorageModeShared", uint64(storageModeShared)},
		{"MTL::CommandBufferStatus", "CommandBufferStatusNotEnqueued", uint64(commandBufferStatusNotEnqueued)},
		{"MTL::CommandBufferStatus", "CommandBufferStatusEnqueued", uint64(commandBufferStatusEnqueued)},
		{"MTL::CommandBufferStatus", "CommandBufferStatusCommitted", uint64(commandBufferStatusCommitted)},
		{"MTL::CommandBufferStatus", "CommandBufferStatusScheduled", uint64(commandBufferStatusScheduled)},
		{"MTL::CommandBufferStatus", "CommandBufferStatusCompleted", uint64(commandBufferStatusCompleted)},
		{"MTL::CommandBufferStatus", "CommandBufferStatusError", uint64(commandBufferStatusError)},
		{"MTL::LanguageVersion", "LanguageVersion3_1", uint64(languageVersion3_1)},
		{"MTL::MathMode", "MathModeSafe", uint64(mathModeSafe)},
		{"MTL::MathFloatingPointFunctions", "MathFloatingPointFunctionsPrecise", uint64(mathFloatingPointFunctionsPrecise)},
		{"NS::StringEncoding", "UTF8StringEncoding", uint64(utf8StringEncoding)},
	} {
		v, ok := enums[e.typ].values[e.name]
		if !ok {
			t.Errorf("testdata/enums.txt has no %s %s", e.typ, e.name)
		} else if v != e.value {
			t.Errorf("%s %s: api.go has %#x, metal-cpp %#x", e.typ, e.name, e.value, v)
		}
	}
}

// TestResourceStorageModes derives every MTLResourceStorageMode as Apple defines it, an
// MTLStorageMode shifted by MTLResourceStorageModeShift, and compares metal-cpp's table: all
// agree but ResourceStorageModeMemoryless, listed as 1 << 5 where Apple's value is 3 << 4. tfd
// uses only Shared.
func TestResourceStorageModes(t *testing.T) {
	enums := readEnums(t)
	modes, options := enums["MTL::StorageMode"].values, enums["MTL::ResourceOptions"].values
	for _, m := range []string{"Shared", "Managed", "Private", "Memoryless"} {
		want := modes["StorageMode"+m] << resourceStorageModeShift
		got, ok := options["ResourceStorageMode"+m]
		switch {
		case !ok:
			t.Errorf("testdata/enums.txt has no ResourceStorageMode%s", m)
		case got == want:
		case m == "Memoryless":
			t.Logf("metal-cpp's table has ResourceStorageModeMemoryless = %#x; Apple's is %#x (the known wrong row)", got, want)
		default:
			t.Errorf("ResourceStorageMode%s: metal-cpp's table %#x, StorageMode%s << %d = %#x", m, got, m, resourceStorageModeShift, want)
		}
	}
}

// TestDarwinSendsWhatTheTableSays reads the darwin binding's sources: each selector variable is
// registered from the table by selector(name) and named after the full selector, every message
// of the table has one, and every send passes the table's number of arguments.
func TestDarwinSendsWhatTheTableSays(t *testing.T) {
	names, err := filepath.Glob("*_darwin.go")
	if err != nil || len(names) == 0 {
		t.Fatalf("no darwin sources: %v", err)
	}
	vars := map[string]string{} // sel_… variable → selector
	sends := map[string][]int{} // sel_… variable → arguments after it, at each send
	fset := token.NewFileSet()
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if s, ok := selectorCall(n.Values[i]); ok {
							vars[id.Name] = s
						}
					}
				}
			case *ast.CallExpr:
				if !isSend(n.Fun) {
					break
				}
				for i, a := range n.Args {
					if id, ok := a.(*ast.Ident); ok && strings.HasPrefix(id.Name, "sel_") {
						sends[id.Name] = append(sends[id.Name], len(n.Args)-i-1)
						break
					}
				}
			}
			return true
		})
	}
	registered := map[string]bool{}
	for v, s := range vars {
		registered[s] = true
		if want := "sel_" + strings.ReplaceAll(strings.TrimSuffix(s, ":"), ":", "_"); v != want {
			t.Errorf("the variable for %s is %s, want %s", s, v, want)
		}
		m, ok := lookupMessage(s)
		if !ok {
			t.Errorf("%s registers %s, which the messages table lacks", v, s)
			continue
		}
		if len(sends[v]) == 0 {
			t.Errorf("%s is never sent", s)
		}
		for _, n := range sends[v] {
			if n != len(m.args) {
				t.Errorf("a send of %s passes %d arguments; the table says %d", s, n, len(m.args))
			}
		}
	}
	for v := range sends {
		if _, ok := vars[v]; !ok {
			t.Errorf("%s is sent but not registered by selector()", v)
		}
	}
	for _, m := range messages {
		if !registered[m.selector] {
			t.Errorf("%s %s is in the table but the darwin binding never registers it", m.class, m.selector)
		}
	}
	t.Logf("%d selectors registered and sent as the table says, in %d darwin files", len(vars), len(names))
}

// selectorCall matches selector("name").
func selectorCall(e ast.Expr) (string, bool) {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) != 1 {
		return "", false
	}
	if fn, ok := c.Fun.(*ast.Ident); !ok || fn.Name != "selector" {
		return "", false
	}
	lit, ok := c.Args[0].(*ast.BasicLit)
	if !ok {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// isSend matches send(…) and x.send(…): the two ways the binding sends a message.
func isSend(fn ast.Expr) bool {
	switch fn := fn.(type) {
	case *ast.Ident:
		return fn.Name == "send"
	case *ast.SelectorExpr:
		return fn.Sel.Name == "send"
	}
	return false
}
