//go:build !linux

package statebench

import "os"

// fileBlocks returns the file's size; without inodes every file counts as
// distinct (hard links twice).
func fileBlocks(path string) (size int64, dev, ino uint64, ok bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, 0, false
	}
	return fi.Size(), 0, uint64(fi.ModTime().UnixNano()) ^ uint64(len(path)), true
}
