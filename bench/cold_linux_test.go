//go:build linux

package bench

import "syscall"

// madvHugepage is MADV_HUGEPAGE, which package syscall does not name.
const madvHugepage = 14

// adviseHugePages asks for transparent huge pages behind b.
func adviseHugePages(b []byte) error { return syscall.Madvise(b, madvHugepage) }
