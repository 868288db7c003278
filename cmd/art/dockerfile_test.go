package main

import (
	"bufio"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Ensure the Dockerfile builds what it promises. No docker daemon or
// podman runs on the test machines, so the image is checked statically:
// a build stage on the Go version go.mod asks for, a final stage from
// scratch, a non-root USER, /data as a VOLUME and the data folder of the
// entry point, and the Dockerfile's own go build command, run here, gives a
// static binary (no interpreter, no shared libraries).
func TestDockerfile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var froms, users, volumes, builds []string
	var entry string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		instr, rest, _ := strings.Cut(line, " ")
		switch instr {
		case "FROM":
			froms = append(froms, rest)
		case "USER":
			users = append(users, rest)
		case "VOLUME":
			volumes = append(volumes, rest)
		case "ENTRYPOINT":
			entry = rest
		case "RUN":
			if strings.Contains(rest, "go build") {
				builds = append(builds, rest)
			}
		}
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:"+string(goVersion[1])+"-") || !strings.HasSuffix(froms[0], " AS build") || froms[1] != "scratch" {
		t.Errorf("stages %q; want a golang:%s build stage and a scratch final stage", froms, goVersion[1])
	}
	if len(users) != 1 || strings.HasPrefix(users[0], "0") || strings.HasPrefix(users[0], "root") {
		t.Errorf("USER %q; want one non-root user", users)
	}
	if len(volumes) != 1 || volumes[0] != "/data" || !strings.Contains(entry, `"--data", "/data"`) || !strings.Contains(entry, `"serve"`) {
		t.Errorf("VOLUME %q, ENTRYPOINT %s; want /data as the volume art serve stores in", volumes, entry)
	}
	if len(builds) != 1 || !strings.HasPrefix(builds[0], "CGO_ENABLED=0 ") {
		t.Fatalf("go build steps %q; want one with CGO_ENABLED=0", builds)
	}
	if testing.Short() {
		t.Skip("-short: not running the Dockerfile's go build")
	}
	// Run the Dockerfile's build command as written (a RUN line is a shell
	// command), into a temporary file.
	out := filepath.Join(t.TempDir(), "art")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.Replace(builds[0], "-o /out/art", "-o "+out, 1))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", builds[0], err, b)
	}
	bin, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v segment: it is not static", p.Type)
		}
	}
	if libs, _ := bin.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v", libs)
	}
}
