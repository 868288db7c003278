// Package trainbar shows the progress of a training step (sequences
// trained of the step's total) as a progress bar, like ART's tqdm bar. It
// draws only on a terminal; elsewhere it is silent.
package trainbar

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar is the progress bar of one training step. The zero value and a nil
// *Bar are silent. Its methods must not be called concurrently.
type Bar struct {
	w    io.Writer
	desc string
	bar  *progressbar.ProgressBar
}

// New returns a bar drawn on w (nil means os.Stderr) unless quiet is set or
// w is not a terminal, in which case it returns nil, a silent bar.
func New(w io.Writer, quiet bool, desc string) *Bar {
	if w == nil {
		w = os.Stderr
	}
	f, ok := w.(interface{ Fd() uintptr })
	if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &Bar{w: w, desc: desc}
}

// Update shows done of total sequences trained.
func (b *Bar) Update(done, total int) {
	if b == nil || total <= 0 {
		return
	}
	if b.bar == nil {
		w := b.w
		b.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(b.desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	b.bar.Set(done)
}

// Finish completes the bar after a successful step; it is a no-op when
// nothing was drawn.
func (b *Bar) Finish() {
	if b != nil && b.bar != nil {
		b.bar.Finish()
	}
}

// Abort stops drawing the bar after a failed step, leaving it where it
// was.
func (b *Bar) Abort() {
	if b != nil && b.bar != nil {
		b.bar.Exit()
	}
}
