//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package store

import (
	"os"
	"sync"
)

// processLock is the fallback where flock(2) is unavailable: it serialises
// writers inside this process only. Appends still go out as one write each,
// but writers in other processes are not excluded on these platforms.
var processLock sync.Mutex

func lockFile(*os.File) error {
	processLock.Lock()
	return nil
}

func unlockFile(*os.File) error {
	processLock.Unlock()
	return nil
}
