package viewextension

import "go.opentelemetry.io/collector/config/confighttp"

// Config is the extension's: an HTTP server, on localhost:55680 by default; tls, auth and cors work
// as for any confighttp server.
type Config struct {
	confighttp.ServerConfig `mapstructure:",squash"`
}
