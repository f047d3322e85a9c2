package statebench

import (
	"os"
	"syscall"
)

// fileBlocks returns the bytes allocated to the file at path, and its device
// and inode to tell hard links apart.
func fileBlocks(path string) (size int64, dev, ino uint64, ok bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, 0, false
	}
	st, isUnix := fi.Sys().(*syscall.Stat_t)
	if !isUnix {
		return fi.Size(), 0, 0, true
	}
	return st.Blocks * 512, uint64(st.Dev), st.Ino, true
}
