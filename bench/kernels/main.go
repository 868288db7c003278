// Command kernels is the side-by-side benchmark of engine/kernels.Linear
// against OpenBLAS cblas_sgemm (the peer, built separately from obench.c; no
// cgo here). run.sh drives it: it interleaves rounds of the Go runner and
// the OpenBLAS runner and then asks this program for the report.
//
//	kernels run [-t threads] [-dtype f32,bf16,f16,q8,q4] [-mintime s] [-cold MB] [-cpuclock] MxKxN...
//	kernels bw [-t threads]
//	kernels peak [-t threads]
//	kernels report [file...]
//
// run prints one line per shape and dtype:
//
//	go <threads> <dtype> <M>x<K>x<N> <median seconds> <reps>
//
// peak prints the fp32 FMA peak of the vector unit the kernels use,
// "peak <threads> <GFLOP/s> <unit>" (bench/internal/fmapeak: a
// register-only FMA loop, best of 3), which report sets each Go column
// against.
//
// bw prints the memory read bandwidth, "bw <threads> <GB/s>": t goroutines
// each take kernels.Dot over their share of two 256 MiB arrays (median of 5).
//
// Shapes are M×K×N as in kernels.md: C[M×N] = A[M×K]·Wᵀ, W the [N×K]
// weight. report reads such lines (from both runners, several rounds),
// takes the median over rounds of each configuration and prints a markdown
// table of GFLOP/s and Go/OpenBLAS ratios.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/artgo/art/bench/internal/fmapeak"
	"github.com/artgo/art/bench/internal/membw"
	"github.com/artgo/art/engine/kernels"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kernels run|report ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "run":
		run(os.Args[2:])
	case "bw":
		bandwidth(os.Args[2:])
	case "peak":
		fmaPeak(os.Args[2:])
	case "report":
		report(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "kernels: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

type shape struct{ M, K, N int }

func parseShape(s string) (shape, error) {
	var sh shape
	if _, err := fmt.Sscanf(strings.ReplaceAll(s, "×", "x"), "%dx%dx%d", &sh.M, &sh.K, &sh.N); err != nil {
		return sh, fmt.Errorf("bad shape %q: %v", s, err)
	}
	return sh, nil
}

func (s shape) String() string { return fmt.Sprintf("%dx%dx%d", s.M, s.K, s.N) }

func run(args []string) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	threads := fs.Int("t", 1, "GOMAXPROCS (worker goroutines)")
	dtypes := fs.String("dtype", "f32,bf16", "weight dtypes")
	mintime := fs.Duration("mintime", 500*time.Millisecond, "minimum time per shape")
	cold := fs.Float64("cold", 0, "for M <= 16, cycle through weight copies totalling this many MB")
	cpuClock := fs.Bool("cpuclock", false, "with -t 1, time calls by the thread's CPU time (leaves out time the host gave to other processes)")
	fs.Parse(args)
	clock := func() float64 { return float64(time.Now().UnixNano()) / 1e9 }
	if *cpuClock && *threads == 1 {
		runtime.LockOSThread()
		clock = func() float64 {
			var ts syscall.Timespec
			syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0)
			return float64(ts.Nano()) / 1e9
		}
	}
	runtime.GOMAXPROCS(*threads)
	r := rand.New(rand.NewPCG(1, 2))
	for _, arg := range fs.Args() {
		sh, err := parseShape(arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kernels:", err)
			os.Exit(2)
		}
		for _, dts := range strings.Split(*dtypes, ",") {
			dt := kernels.F32
			switch dts {
			case "bf16":
				dt = kernels.BF16
			case "f16":
				dt = kernels.F16
			case "q8":
				dt = kernels.Q8
			case "q4":
				dt = kernels.Q4
			}
			copies := 1
			if *cold > 0 && sh.M <= 16 {
				copies = int(*cold*1e6/(float64(sh.N)*float64(sh.K)*4)) + 1
			}
			ws := make([]*kernels.Mat, copies)
			for c := range ws {
				ws[c] = randMat(r, sh.N, sh.K, dt)
				ws[c].Prepack()
			}
			inp := randSlice(r, sh.M*sh.K)
			out := make([]float32, sh.M*sh.N)
			// Finish the garbage collection that setting up triggered, so
			// that it does not run during the timed calls.
			runtime.GC()
			kernels.Linear(out, inp, ws[0], nil, sh.M)
			var times []float64
			start := time.Now()
			for c := 0; time.Since(start) < *mintime || len(times) < 5; {
				c = (c + 1) % copies
				t0 := clock()
				kernels.Linear(out, inp, ws[c], nil, sh.M)
				times = append(times, clock()-t0)
			}
			slices.Sort(times)
			fmt.Printf("go %d %s %v %.9f %d\n", *threads, dts, sh, times[len(times)/2], len(times))
			ws = nil
			runtime.GC()
		}
	}
}

func bandwidth(args []string) {
	fs := flag.NewFlagSet("bw", flag.ExitOnError)
	threads := fs.Int("t", 1, "goroutines")
	fs.Parse(args)
	runtime.GOMAXPROCS(*threads)
	fmt.Printf("bw %d %.2f\n", *threads, membw.NewProbe().Read(*threads, 5))
}

func fmaPeak(args []string) {
	fs := flag.NewFlagSet("peak", flag.ExitOnError)
	threads := fs.Int("t", 1, "threads")
	fs.Parse(args)
	runtime.GOMAXPROCS(*threads)
	r := fmapeak.Measure(*threads, 300*time.Millisecond, 3)
	if u, _ := kernels.ActiveUnit(); u == kernels.UnitBF16 {
		if b, ok := fmapeak.MeasureBF16(*threads, 300*time.Millisecond, 3); ok {
			r = b
		}
	}
	fmt.Printf("peak %d %.2f %s\n", *threads, r.GFLOPS, r.Unit)
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.Float64()*2 - 1)
	}
	return s
}

func randMat(r *rand.Rand, N, K int, dt kernels.DType) *kernels.Mat {
	v := randSlice(r, N*K)
	if dt == kernels.F32 {
		return kernels.NewMatF32(N, K, v)
	}
	if dt == kernels.Q8 || dt == kernels.Q4 {
		q, err := kernels.Quantize(kernels.NewMatF32(N, K, v), dt)
		if err != nil {
			panic(err)
		}
		return q
	}
	u := make([]uint16, len(v))
	for i, x := range v {
		if dt == kernels.F16 {
			u[i] = kernels.F32ToF16(x)
		} else {
			u[i] = kernels.F32ToBF16(x)
		}
	}
	return &kernels.Mat{Rows: N, Cols: K, DType: dt, U16: u}
}

// key identifies one configuration across rounds.
type key struct {
	lib     string
	threads int
	dtype   string
	shape   string
}

func report(files []string) {
	var in []io.Reader
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kernels:", err)
			os.Exit(1)
		}
		defer fh.Close()
		in = append(in, fh)
	}
	if len(in) == 0 {
		in = append(in, os.Stdin)
	}
	samples := map[key][]float64{}
	bw := map[int][]float64{}
	peak := map[int][]float64{}
	peakUnit := ""
	var shapes []string
	var threads []int
	for _, rd := range in {
		sc := bufio.NewScanner(rd)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 3 && f[0] == "peak" {
				t, _ := strconv.Atoi(f[1])
				v, _ := strconv.ParseFloat(f[2], 64)
				peak[t] = append(peak[t], v)
				peakUnit = strings.Join(f[3:], " ")
				continue
			}
			if len(f) == 3 && f[0] == "bw" {
				t, _ := strconv.Atoi(f[1])
				v, _ := strconv.ParseFloat(f[2], 64)
				bw[t] = append(bw[t], v)
				continue
			}
			if len(f) < 5 || (f[0] != "go" && f[0] != "openblas") {
				continue
			}
			t, _ := strconv.Atoi(f[1])
			sec, err := strconv.ParseFloat(f[4], 64)
			if err != nil || sec <= 0 {
				continue
			}
			k := key{f[0], t, f[2], f[3]}
			samples[k] = append(samples[k], sec)
			if !slices.Contains(shapes, f[3]) {
				shapes = append(shapes, f[3])
			}
			if !slices.Contains(threads, t) {
				threads = append(threads, t)
			}
		}
	}
	slices.Sort(threads)
	gflops := func(k key) (float64, int) {
		s := samples[k]
		if len(s) == 0 {
			return 0, 0
		}
		sh, _ := parseShape(k.shape)
		s = slices.Clone(s)
		slices.Sort(s)
		med := s[len(s)/2]
		if len(s)%2 == 0 {
			med = (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
		return 2 * float64(sh.M) * float64(sh.K) * float64(sh.N) / med / 1e9, len(s)
	}
	cell := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", v)
	}
	ratio := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "–"
		}
		return fmt.Sprintf("**%.2f**", a/b)
	}
	// The FMA peak of each thread count: the best of its rounds.
	peakOf := func(t int) float64 {
		if len(peak[t]) == 0 {
			return 0
		}
		return slices.Max(peak[t])
	}
	hdr := "| shape M×K×N |"
	sep := "| --- |"
	for _, t := range threads {
		hdr += fmt.Sprintf(" Go f32 %dt | Go bf16 %dt | OpenBLAS %dt | f32/OB | bf16/OB |", t, t, t)
		sep += " ---: | ---: | ---: | ---: | ---: |"
		if peakOf(t) > 0 {
			hdr += fmt.Sprintf(" Go f32 %% of peak %dt |", t)
			sep += " ---: |"
		}
	}
	fmt.Println(hdr)
	fmt.Println(sep)
	rounds := 0
	for _, sh := range shapes {
		line := "| " + strings.ReplaceAll(sh, "x", "×") + " |"
		for _, t := range threads {
			gf, n1 := gflops(key{"go", t, "f32", sh})
			gb, n2 := gflops(key{"go", t, "bf16", sh})
			ob, n3 := gflops(key{"openblas", t, "f32", sh})
			rounds = max(rounds, n1, n2, n3)
			line += fmt.Sprintf(" %s | %s | %s | %s | %s |", cell(gf), cell(gb), cell(ob), ratio(gf, ob), ratio(gb, ob))
			if p := peakOf(t); p > 0 {
				line += fmt.Sprintf(" %.0f %% |", 100*gf/p)
			}
		}
		fmt.Println(line)
	}
	fmt.Printf("\nGFLOP/s = 2·M·K·N / time; each cell is the median over %d interleaved rounds of the median of ≥5 calls.\n", rounds)
	for _, t := range threads {
		if p := peakOf(t); p > 0 {
			fmt.Printf("%dt: FMA peak %.1f GFLOP/s (%s; a register-only FMA loop, best of the rounds: the ceiling no product can pass).\n", t, p, peakUnit)
		}
	}
	// Decode shapes read each weight once: show the weight stream in GB/s
	// next to the machine's read bandwidth measured in the same rounds.
	for _, t := range threads {
		v := slices.Clone(bw[t])
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		line := fmt.Sprintf("%dt: read bandwidth %.1f GB/s (kernels.Dot over 2×256 MiB)", t, v[len(v)/2])
		for _, sh := range shapes {
			s, _ := parseShape(sh)
			if s.M != 1 {
				continue
			}
			for _, dt := range []string{"f32", "bf16"} {
				gf, _ := gflops(key{"go", t, dt, sh})
				if gf == 0 {
					continue
				}
				size := 4.0
				if dt == "bf16" {
					size = 2
				}
				// 2 flops per weight at M = 1.
				line += fmt.Sprintf("; %s %s streams weights at %.1f GB/s", strings.ReplaceAll(sh, "x", "×"), dt, gf/2*size)
			}
		}
		fmt.Println(line + ".")
	}
}
