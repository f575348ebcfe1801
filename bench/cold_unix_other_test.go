//go:build unix && !linux

package bench

import "errors"

// adviseHugePages is Linux only.
func adviseHugePages([]byte) error { return errors.New("transparent huge pages are Linux only") }
