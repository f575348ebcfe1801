//go:build linux

package bench

import "golang.org/x/sys/unix"

// adviseHugePages asks for transparent huge pages behind b.
func adviseHugePages(b []byte) error { return unix.Madvise(b, unix.MADV_HUGEPAGE) }
