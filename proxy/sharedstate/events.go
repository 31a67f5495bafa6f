package sharedstate

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// The kinds of an [Event].
const (
	// EventReload: `openclaw mcp reload` applied openclaw.json (mcp.servers,
	// the tool policy, the tool pins) on the replica that sent it.
	EventReload = "reload"
	// EventPolicy: the replica's policy set was swapped (a changed module,
	// config or rate limit).
	EventPolicy = "policy"
)

// eventsChannel is the pub/sub channel of the events.
const eventsChannel = KeyPrefix + "events"

// Event is a change on one replica that every other replica applies too,
// published on Redis pub/sub.
type Event struct {
	V int `json:"v"`
	// Kind is EventReload or EventPolicy; a kind this release does not
	// know is passed on (its handler ignores it).
	Kind string `json:"kind"`
	// Replica is the id of the replica that sent it ([State.Replica]).
	Replica string `json:"replica"`
}

// DecodeEvent reads an event as published on the channel.
func DecodeEvent(raw []byte) (Event, error) {
	var ev Event
	if err := decodeRecord("event", raw, &ev); err != nil {
		return Event{}, err
	}
	if ev.Kind == "" || ev.Replica == "" {
		return Event{}, errMalformed("event", "no kind or replica")
	}
	return ev, nil
}

// Publish sends an event of kind from this replica to every other.
func (s *State) Publish(ctx context.Context, kind string) error {
	raw := encodeRecord(Event{V: RecordVersion, Kind: kind, Replica: s.replica})
	return s.wrap("publish "+kind, s.client.Publish(ctx, eventsChannel, raw).Err())
}

// Subscriber is what [State.Subscribe] calls.
type Subscriber struct {
	// Event is called with each event another replica published, one at
	// a time, in order.
	Event func(Event)
	// Resync is called each time the subscription is back after a lost
	// connection to Redis (events published meanwhile are lost): the
	// replica re-reads what events would have told it.
	Resync func()
	// Error is called with each failure: the subscription lost (an
	// [*Error], retried), an event that does not decode (skipped). Nil
	// drops them.
	Error func(error)
}

// retryEvery bounds the wait between two attempts to subscribe again.
const retryEvery = time.Second

// healthEvery is how long the subscription may be silent before it is
// checked with a PING (a connection to a Redis that vanished from the
// network would otherwise wait for ever).
const healthEvery = 15 * time.Second

// Subscribe receives the events of the other replicas until ctx is done,
// subscribing again after each lost connection. It returns when ctx is
// done.
func (s *State) Subscribe(ctx context.Context, sub Subscriber) {
	ps := s.client.Subscribe(ctx, eventsChannel)
	defer ps.Close()
	// A read in progress does not watch ctx: closing ends it.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	fail := func(err error) {
		if sub.Error != nil {
			sub.Error(err)
		}
	}
	subscribed, lost := false, false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, healthEvery)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
			err = ps.Ping(ctx) // a failed ping drops the connection: the next Receive reconnects
			if err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
				return
			}
			if subscribed || !lost {
				fail(s.wrap("subscribe to "+eventsChannel, err))
			}
			lost = true
			select { // go-redis reconnects and subscribes again on the next Receive
			case <-ctx.Done():
			case <-time.After(retryEvery / 4):
			}
			subscribed = false
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			if lost && sub.Resync != nil {
				sub.Resync()
			}
			subscribed, lost = true, false
		case *redis.Message:
			ev, err := DecodeEvent([]byte(m.Payload))
			switch {
			case err != nil:
				fail(err)
			case ev.Replica != s.replica && sub.Event != nil:
				sub.Event(ev)
			}
		}
	}
}
