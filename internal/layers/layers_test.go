package layers

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/artgo/art/server"
)

const mod = "github.com/artgo/art"

// imports returns each package of the module with the module's packages it
// imports directly (tests excluded).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		p := rel(fields[0])
		pkgs[p] = nil
		for _, imp := range fields[1:] {
			if imp == mod || strings.HasPrefix(imp, mod+"/") {
				pkgs[p] = append(pkgs[p], rel(imp))
			}
		}
	}
	return pkgs
}

// rel names a package of the module by its folder ("." for the root).
func rel(path string) string {
	if path == mod {
		return "."
	}
	return strings.TrimPrefix(path, mod+"/")
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func TestImportRules(t *testing.T) {
	pkgs := imports(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	rules := []struct {
		from string // a folder and everything under it
		may  func(imp string) bool
		why  string
	}{
		{"engine", func(i string) bool { return under(i, "engine") || under(i, "internal") },
			"the engine knows nothing of the SDK, hosts, HTTP or the store"},
		{"host", func(i string) bool { return i != "server" && !under(i, "server") && !under(i, "backend") },
			"hosts sit below the server and the backends"},
		{"server", func(i string) bool { return !under(i, "engine") && !under(i, "host/native") },
			"the server depends on the host interfaces, not on an engine"},
		{".", func(i string) bool { return i == "store" || under(i, "internal") },
			"the SDK's root package is the top layer users import: it imports no engine, host or server"},
		{"ruler", func(i string) bool { return i == "." || under(i, "internal") },
			"RULER is a user of the SDK"},
		{"examples", func(i string) bool { return !under(i, "demo") && !under(i, "bench") && !under(i, "cmd") },
			"examples are SDK users and import no tool"},
		{"dashboard", func(i string) bool { return i == "store" || under(i, "internal") },
			"the dashboard reads the store; it needs no engine, host, server or SDK"},
		{"backend/local", func(i string) bool { return !under(i, "engine") },
			"the in-process backend reaches the engine through a host"},
	}
	for p, imps := range pkgs {
		for _, r := range rules {
			if r.from == "." && p != "." || r.from != "." && !under(p, r.from) {
				continue
			}
			for _, imp := range imps {
				if !r.may(imp) {
					t.Errorf("%s imports %s: %s", p, imp, r.why)
				}
			}
		}
		if !under(p, "examples") {
			for _, imp := range imps {
				if under(imp, "examples") {
					t.Errorf("%s imports %s: nothing outside examples/ imports an example", p, imp)
				}
			}
		}
	}
}

// TestBinaryCompilesNoExample checks every package the `art` command
// builds, directly or not.
func TestBinaryCompilesNoExample(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", mod+"/cmd/art").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, mod+"/examples") {
			t.Errorf("the art binary compiles %s", p)
		}
	}
}

// TestServerDoesNotTrain checks that training has one path: callers train
// through a host (counted by host.Meter), never through the HTTP server's
// Go API.
func TestServerDoesNotTrain(t *testing.T) {
	typ := reflect.TypeFor[*server.Server]()
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; strings.HasPrefix(name, "Train") {
			t.Errorf("server.Server has method %s; train through the host instead", name)
		}
	}
}
