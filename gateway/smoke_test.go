package gateway_test

import (
	"testing"

	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
)

func TestSmoke(t *testing.T) {
	gw := gatewaytest.StartSeeded(t)
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token, Device: newDevice(t)})
	t.Logf("hello %s", c.Hello()[:300])
	t.Logf("list %v", request(t, c, "sessions.list", map[string]any{"limit": 50, "includeDerivedTitles": true, "includeLastMessage": true}))
}
