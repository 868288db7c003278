//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package store

import (
	"os"
	"path/filepath"
	"sync"
)

// processLock and logLock are the fallback where flock(2) is unavailable:
// they serialise writers inside this process only (logLock the Log calls,
// which take the others inside; processLock everything else). Appends still
// go out as one write each, but writers in other processes are not excluded
// on these platforms.
var processLock, logLock sync.Mutex

func mutexFor(f *os.File) *sync.Mutex {
	if filepath.Base(f.Name()) == logLockFile {
		return &logLock
	}
	return &processLock
}

func lockFile(f *os.File) error {
	mutexFor(f).Lock()
	return nil
}

func unlockFile(f *os.File) error {
	mutexFor(f).Unlock()
	return nil
}
