package viewextension

import "go.opentelemetry.io/collector/config/confighttp"

// Config is the extension's: an HTTP server, on localhost:55680 by default; tls, auth and cors work
// as for any confighttp server.
type Config struct {
	confighttp.ServerConfig `mapstructure:",squash"`
}

func confighttpDefault() confighttp.ServerConfig {
	sc := confighttp.NewDefaultServerConfig()
	sc.NetAddr.Endpoint = defaultEndpoint
	return sc
}

// defaultEndpoint is where the view is served unless endpoint says otherwise: localhost only.
const defaultEndpoint = "localhost:55680"
