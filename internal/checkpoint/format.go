package checkpoint

import (
	"errors"
	"hash/crc32"
	"strconv"
)

// The checkpoint is one value under one key of the storage client: a magic, a format version, the
// aggregations it was taken with (see fingerprint), the service.instance.id its results carry, then
// each participant's section (participants.go), each but the last length-prefixed: the engine
// snapshot (watermark, open windows, fired results not yet collected), the metric inputs' streams
// (see metricinput.Inputs.AppendTo), the directory of the remembered identities (dedup.Mark; empty
// without dedup), the result batches queued for delivery; and a CRC-32C of all that before it, so
// that any damage of up to 32 bits in a row, and most other damage, is detected. The identities
// themselves are parts under keys of their own (IDsKey), one a slice of event time, each written when
// it changed and checked against the CRC-32C the directory lists; all of one checkpoint are written
// in one storage batch.
//
// Version 6, which held every identity in the value itself, is still read: its windows, streams and
// queue are restored, and its identities (of a hash this version no longer computes) are dropped,
// logged. A checkpoint of any other version is discarded, logged and counted, like a damaged one.
const (
	Key     = "window_aggregator.state"
	Magic   = "WACP"
	Version = 7
	// VersionV6 is the version before the identities were parts of their own
	VersionV6 = 6
)

// IDsKey is the storage key of the part of the remembered identities of slice idx.
func IDsKey(idx int64) string { return Key + ".ids." + strconv.FormatInt(idx, 10) }

// CRC32C is the table of the checksums a checkpoint and its parts carry.
var CRC32C = crc32.MakeTable(crc32.Castagnoli)

var (
	errCheckpointCorrupt  = errors.New("checkpoint is truncated or corrupt")
	errCheckpointChecksum = errors.New("checkpoint is damaged: its checksum does not match")
)
