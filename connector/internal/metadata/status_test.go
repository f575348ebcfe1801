package metadata_test

import (
	"testing"

	"github.com/windowaggregator/windowaggregator/connector"
	"github.com/windowaggregator/windowaggregator/connector/internal/metadata"
)

// The connector factory's type and stabilities are connector/metadata.yaml's (regenerate with make
// generate after changing either).
func TestStatusIsTheFactorys(t *testing.T) {
	f := connector.NewFactory()
	if f.Type() != metadata.Type {
		t.Errorf("factory type %v, metadata.yaml %v", f.Type(), metadata.Type)
	}
	for _, c := range []struct {
		pair             string
		factory, declare any
	}{
		{"traces_to_metrics", f.TracesToMetricsStability(), metadata.TracesToMetricsStability},
		{"logs_to_metrics", f.LogsToMetricsStability(), metadata.LogsToMetricsStability},
		{"traces_to_traces", f.TracesToTracesStability(), metadata.TracesToTracesStability},
		{"logs_to_logs", f.LogsToLogsStability(), metadata.LogsToLogsStability},
	} {
		if c.factory != c.declare {
			t.Errorf("%s: factory stability %v, metadata.yaml %v", c.pair, c.factory, c.declare)
		}
	}
}
