package connector

import (
	"testing"

	"github.com/windowaggregator/windowaggregator"
)

func TestNewFactoryIsTheConnectorFactory(t *testing.T) {
	f := NewFactory()
	if f.Type() != windowaggregator.Type {
		t.Fatalf("type %q, want %q", f.Type(), windowaggregator.Type)
	}
	if f.TracesToMetricsStability() == 0 || f.LogsToLogsStability() == 0 {
		t.Fatal("connector factory lacks its signal pairs")
	}
}
