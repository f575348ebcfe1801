//go:build amd64 || arm64

package dedup

import "unsafe"

// prefetch asks the processor to bring the cache line at addr into its nearest cache. It is a hint:
// it reads nothing the program sees (no data race with a writer), never faults, and waits for
// nothing, so that a lock taken after it does not wait for the line either.
//
//go:noescape
func prefetch(addr unsafe.Pointer)
