package bridge

import (
	"context"
	"sort"
	"testing"
	"time"
)

// BenchmarkEvents measures the event queue (docs/protocol-facts.md, Event queue;
// target ≥ 100k events/s, events_wait wake ≤ 1 ms).
//
//	go test -run '^$' -bench BenchmarkEvents -benchmem ./bridge/
func BenchmarkEvents(b *testing.B) {
	payload := sessionMessagePayload(b, "benchmark message", nil)

	// push: the queue alone, a prebuilt event.
	b.Run("push", func(b *testing.B) {
		q := newEventQueue()
		body := []byte(`{"type":"message","sessionKey":"agent:main:main","raw":{}}`)
		b.ReportAllocs()
		for b.Loop() {
			q.push("agent:main:main", body)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})

	// gateway: HandleGatewayEvent with the captured real session.message
	// payload (about 5 KB): decode, build the event, queue it.
	b.Run("gateway-session.message", func(b *testing.B) {
		br := New(nil, &Options{Enforcer: allowAll(), ClaudeChannelMode: ChannelOff})
		defer br.Close()
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			br.HandleGatewayEvent("session.message", payload)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})

	// poll: events_poll of 20 events from a full queue.
	b.Run("poll20", func(b *testing.B) {
		br := New(nil, &Options{Enforcer: allowAll(), ClaudeChannelMode: ChannelOff})
		defer br.Close()
		for range QueueLimit {
			br.HandleGatewayEvent("session.message", payload)
		}
		a, _ := validateArgs([]byte(`{"after_cursor":500}`), toolByName(ToolEventsPoll).props, nil)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := br.eventsPoll(context.Background(), a); err != nil {
				b.Fatal(err)
			}
		}
	})

	// wake: from push to the waiting events_wait having its event.
	b.Run("wait-wake", func(b *testing.B) {
		q := newEventQueue()
		body := []byte(`{"type":"message"}`)
		lat := make([]time.Duration, 0, 1024)
		for b.Loop() {
			after := q.newest
			got := make(chan time.Time, 1)
			go func() {
				q.wait(context.Background(), after, "", time.Minute)
				got <- time.Now()
			}()
			for q.waiterCount() == 0 {
				time.Sleep(10 * time.Microsecond)
			}
			start := time.Now()
			q.push("s", body)
			lat = append(lat, (<-got).Sub(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "wake-p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "wake-p99-ns")
	})
}
