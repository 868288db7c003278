// Package httpurl checks the base URLs users give for the HTTP services the
// SDK and the server talk to (an art server, an inference engine, a managed
// trainer, an OpenTelemetry collector), so each says the same thing about a
// URL that cannot work before any request is sent.
package httpurl

import (
	"fmt"
	"net/url"
	"strings"
)

// Parse returns raw parsed when it is an absolute http:// or https:// URL
// with a host, and otherwise an error naming what is wrong; example is a
// URL of the right form to show the user.
func Parse(raw, example string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("URL %q: %v; want one like %s", raw, err, example)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("URL %q: scheme must be http or https; want one like %s", raw, example)
	case u.Host == "":
		return nil, fmt.Errorf("URL %q: no host; want one like %s", raw, example)
	}
	return u, nil
}

// Base returns raw checked by Parse, without a trailing slash or a final
// /v1: the root the caller appends its own API paths to.
func Base(raw, example string) (string, error) {
	u, err := Parse(raw, example)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), "/v1"), nil
}
