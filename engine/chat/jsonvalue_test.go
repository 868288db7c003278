package chat

import (
	"math"
	"testing"

	"github.com/nikolalohinski/gonja/v2/exec"
)

func TestPyFloat(t *testing.T) {
	point1, point2 := 0.1, 0.2 // variables: a constant 0.1+0.2 is exactly 0.3
	// want values are Python's repr(x) (== json.dumps(x)) for each x.
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{point1 + point2, "0.30000000000000004"},
		{1e-4, "0.0001"},
		{1e-5, "1e-05"},
		{0.00012345, "0.00012345"},
		{123456789, "123456789.0"},
		{1e15, "1000000000000000.0"},
		{1e16, "1e+16"},
		{1.5e16, "1.5e+16"},
		{1e22, "1e+22"},
		{1e100, "1e+100"},
		{-2.5e-300, "-2.5e-300"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.Pi, "3.141592653589793"},
		{1234567890123456.7, "1234567890123456.8"},
		{12345678901234567, "1.2345678901234568e+16"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
	}
	for _, tt := range tests {
		if got := pyFloat(tt.in, true); got != tt.want {
			t.Errorf("pyFloat(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestPyJSON(t *testing.T) {
	two := "  "
	tests := []struct {
		name string
		in   string // JSON decoded with decodeJSON first
		opts pyJSONOptions
		want string
	}{
		{"key order kept", `{"b":1,"a":{"d":[1,2],"c":null}}`, pyJSONOptions{}, `{"b": 1, "a": {"d": [1, 2], "c": null}}`},
		{"sort keys", `{"b":1,"a":{"d":[1,2],"c":null}}`, pyJSONOptions{sortKeys: true}, `{"a": {"c": null, "d": [1, 2]}, "b": 1}`},
		{"no html escaping, raw unicode", `"<a href='x'>&amp; 日本 😀</a>"`, pyJSONOptions{}, `"<a href='x'>&amp; 日本 😀</a>"`},
		{"escapes", `"q\" b\\ n\n r\r t\t b\b f\f c\u0001 del\u007f ls\u2028"`, pyJSONOptions{}, `"q\" b\\ n\n r\r t\t b\b f\f c\u0001 del` + "\u007f" + ` ls` + "\u2028" + `"`},
		{"numbers", `[1, -2, 2.50, 1e2, 1E-7, 12345678901234567890]`, pyJSONOptions{}, `[1, -2, 2.5, 100.0, 1e-07, 12345678901234567890]`},
		{"empty containers", `{"a":{},"b":[]}`, pyJSONOptions{indent: &two}, "{\n  \"a\": {},\n  \"b\": []\n}"},
		{"indent", `{"a":[1,{"b":true}],"c":"x"}`, pyJSONOptions{indent: &two}, "{\n  \"a\": [\n    1,\n    {\n      \"b\": true\n    }\n  ],\n  \"c\": \"x\"\n}"},
		{"separators", `{"a":[1,2]}`, pyJSONOptions{itemSep: ",", keySep: ":"}, `{"a":[1,2]}`},
		{"duplicate keys keep the first position and last value", `{"a":1,"b":2,"a":3}`, pyJSONOptions{}, `{"a": 3, "b": 2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := decodeJSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := pyJSON(v, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %s; want %s", got, tt.want)
			}
		})
	}
}

func TestDecodeJSON(t *testing.T) {
	v, err := decodeJSON([]byte(`{"z": {}, "y": [], "x": 1.0, "w": 7}`))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := v.(*exec.Dict)
	if !ok {
		t.Fatalf("got %T; want *exec.Dict", v)
	}
	var keys []string
	for _, p := range d.Pairs {
		keys = append(keys, p.Key.String())
	}
	if got, want := keys, []string{"z", "y", "x", "w"}; len(got) != 4 || got[0] != want[0] || got[3] != want[3] {
		t.Errorf("got keys %v; want %v", got, want)
	}
	if z, _ := dictGet(d, "z"); exec.AsValue(z).IsTrue() {
		t.Errorf("got a truthy empty object; want falsy like Python's {}")
	}
	if x, _ := dictGet(d, "x"); x != 1.0 {
		t.Errorf("got x = %#v; want float64 1", x)
	}
	if w, _ := dictGet(d, "w"); w != 7 {
		t.Errorf("got w = %#v; want int 7", w)
	}
	for _, bad := range []string{`{"a":1} x`, `{"a":`, ``} {
		if _, err := decodeJSON([]byte(bad)); err == nil {
			t.Errorf("decodeJSON(%q): got no error; want one", bad)
		}
	}
}
