//go:build !amd64 && !arm64

package dedup

import "unsafe"

// prefetch does nothing where the package has no prefetch instruction: claims find their slots
// as they would without it.
func prefetch(unsafe.Pointer) {}
