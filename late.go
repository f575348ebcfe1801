package windowaggregator

import "go.opentelemetry.io/collector/pdata/pcommon"

// Attributes added to the late records that the connector routes.
const (
	attrLateReason = "window_aggregator.late.reason"    // expired | future | invalid
	attrWatermark  = "window_aggregator.late.watermark" // the watermark the record was judged by, Unix ns
)

// markLate marks a routed late record with its reason and the watermark it was judged by.
func markLate(m pcommon.Map, reason string, watermark int64) {
	m.PutStr(attrLateReason, reason)
	if watermark != minWatermark {
		m.PutInt(attrWatermark, watermark)
	}
}
