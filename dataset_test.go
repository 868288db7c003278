package art

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func collect[T any](t *testing.T, items []T, gps, epochs, initial int, seed int64) []DatasetBatch[T] {
	t.Helper()
	seq, err := IterateDataset(items, gps, epochs, initial, seed)
	if err != nil {
		t.Fatal(err)
	}
	var out []DatasetBatch[T]
	for b := range seq {
		out = append(out, b)
	}
	return out
}

func numbers(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestIterateDataset_Shape(t *testing.T) {
	tests := []struct {
		n, gps, epochs int
		wantSizes      []int // batch sizes of one epoch
	}{
		{10, 3, 2, []int{3, 3, 3, 1}},
		{9, 3, 1, []int{3, 3, 3}},
		{5, 10, 3, []int{5}},
		{1, 1, 4, []int{1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n%d_gps%d_e%d", tt.n, tt.gps, tt.epochs), func(t *testing.T) {
			items := numbers(tt.n)
			batches := collect(t, items, tt.gps, tt.epochs, 0, 7)
			perEpoch := len(tt.wantSizes)
			if len(batches) != perEpoch*tt.epochs || DatasetSteps(tt.n, tt.gps, tt.epochs) != len(batches) {
				t.Fatalf("got %d batches, DatasetSteps %d; want %d", len(batches), DatasetSteps(tt.n, tt.gps, tt.epochs), perEpoch*tt.epochs)
			}
			for e := range tt.epochs {
				var seen []int
				for es := range perEpoch {
					b := batches[e*perEpoch+es]
					if b.Step != e*perEpoch+es || b.Epoch != e || b.EpochStep != es {
						t.Fatalf("batch %d has step %d epoch %d epoch step %d; want %d %d %d", e*perEpoch+es, b.Step, b.Epoch, b.EpochStep, e*perEpoch+es, e, es)
					}
					if len(b.Items) != tt.wantSizes[es] {
						t.Fatalf("batch %d has %d items; want %d", b.Step, len(b.Items), tt.wantSizes[es])
					}
					seen = append(seen, b.Items...)
				}
				slices.Sort(seen)
				if !slices.Equal(seen, items) {
					t.Fatalf("epoch %d visited %v; want every item once", e, seen)
				}
			}
		})
	}
}

func TestIterateDataset_Deterministic(t *testing.T) {
	items := numbers(50)
	a := collect(t, items, 4, 3, 0, 42)
	b := collect(t, items, 4, 3, 0, 42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same seed differ")
	}
	c := collect(t, items, 4, 3, 0, 43)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 give the same sequence")
	}
	epoch := func(bs []DatasetBatch[int], e int) (out []int) {
		for _, b := range bs {
			if b.Epoch == e {
				out = append(out, b.Items...)
			}
		}
		return out
	}
	if slices.Equal(epoch(a, 0), epoch(a, 1)) {
		t.Fatal("epochs 0 and 1 have the same order")
	}
	if slices.Equal(epoch(a, 0), items) {
		t.Fatal("epoch 0 is not shuffled")
	}
}

// Ensure the order is pinned: it is part of the resume contract across
// releases, so a change here breaks users' resumed runs.
func TestIterateDataset_Stable(t *testing.T) {
	got := collect(t, numbers(10), 10, 2, 0, 42)
	want := [][]int{
		{8, 6, 1, 0, 5, 9, 2, 7, 4, 3},
		{1, 6, 5, 2, 4, 8, 9, 0, 7, 3},
	}
	for e, b := range got {
		if !slices.Equal(b.Items, want[e]) {
			t.Errorf("epoch %d order %v; want %v", e, b.Items, want[e])
		}
	}
}

// Ensure starting at any step yields exactly the tail of the full sequence.
func TestIterateDataset_ResumeEqualsTail(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e", "f", "g"}
	full := collect(t, items, 3, 4, 0, 9)
	for start := 0; start <= len(full)+2; start++ {
		got := collect(t, items, 3, 4, start, 9)
		want := full[min(start, len(full)):]
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("from step %d: got %v; want %v", start, got, want)
		}
	}
}

func TestIterateDataset_Break(t *testing.T) {
	seq, _ := IterateDataset(numbers(100), 1, 5, 0, 1)
	n := 0
	for range seq {
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("iterated %d batches; want 3", n)
	}
	// Batches own their Items: changing one does not change the next run.
	seq, _ = IterateDataset(numbers(4), 4, 1, 0, 1)
	for b := range seq {
		b.Items[0] = -1
	}
	for b := range seq {
		if slices.Contains(b.Items, -1) {
			t.Fatal("a batch's Items alias the iterator's state")
		}
	}
}

func TestIterateDataset_Errors(t *testing.T) {
	tests := []struct {
		name                    string
		n, gps, epochs, initial int
		want                    string
	}{
		{"no items", 0, 1, 1, 0, "no items"},
		{"zero groups per step", 3, 0, 1, 0, "groupsPerStep = 0"},
		{"zero epochs", 3, 1, 0, 0, "epochs = 0"},
		{"negative start", 3, 1, 1, -1, "initialStep = -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := IterateDataset(numbers(tt.n), tt.gps, tt.epochs, tt.initial, 0)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
	if got := DatasetSteps(0, 1, 1); got != 0 {
		t.Fatalf("DatasetSteps(0, 1, 1) = %d; want 0", got)
	}
}
