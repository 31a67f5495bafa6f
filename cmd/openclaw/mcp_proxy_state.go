package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/proxy"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

// replicaFanOut makes a change on one `mcp proxy` replica a change on
// every replica sharing its --state: a reload of openclaw.json (`mcp
// reload`) or a policy swap here is published on Redis, and one
// published by another replica is applied here; either way the
// connected clients get notifications/tools/list_changed. Without
// --state (shared nil) a reload stays here.
type replicaFanOut struct {
	shared   *sharedstate.State // nil: no replicas
	logger   *slog.Logger
	reload   mcpReloadFunc // re-reads openclaw.json and applies it here
	policies *livePolicies
	proxy    *proxy.Proxy
	http     *proxy.HTTPHandler // its session records are written again on a resync
}

// stateMonitorEvery is how often a replica pings its --state Redis for
// /readyz.
const stateMonitorEvery = time.Second

// publishTimeout bounds the publication of one event.
const publishTimeout = 2 * time.Second

// publishReplicaEvent tells the other replicas of a change of kind here.
// A failure is logged: they re-read everything when their subscription
// comes back (sharedstate.Subscriber.Resync).
func publishReplicaEvent(shared *sharedstate.State, logger *slog.Logger, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	if err := shared.Publish(ctx, kind); err != nil {
		logger.Warn("the other replicas were not told of this "+kind+"; each re-reads when its connection to Redis is back", "err", err)
	}
}

// reloadHere is the mcpReloadFunc of `mcp reload` on this replica: the
// reload, then, when it succeeded, its publication.
func (f *replicaFanOut) reloadHere(ctx context.Context) (string, error) {
	summary, err := f.reload(ctx)
	if err == nil && f.shared != nil {
		publishReplicaEvent(f.shared, f.logger, sharedstate.EventReload)
	}
	return summary, err
}

// apply re-reads what kinds say changed on another replica (a kind this
// release does not know is skipped) and tells the clients to list again.
func (f *replicaFanOut) apply(ctx context.Context, kinds ...string) {
	for _, kind := range kinds {
		switch kind {
		case sharedstate.EventReload:
			summary, err := f.reload(ctx)
			if err != nil {
				f.logger.Warn("replica: openclaw.json not reloaded after another replica's reload", "err", err)
			} else {
				f.logger.Info("replica: reloaded after another replica's reload: " + summary)
			}
		case sharedstate.EventPolicy:
			// A swap here (res.Changed) publishes in turn; the next
			// replica finds nothing new, so the echo ends.
			_, _ = f.policies.Reload(ctx) // logged by the engine
		default:
			f.logger.Debug("replica: an event of a kind this release does not know, skipped", "kind", kind)
			continue
		}
	}
	if err := f.proxy.NotifyToolsChanged(ctx); err != nil {
		f.logger.Warn("replica: tools not refreshed after another replica's change", "err", err)
	}
}

// resyncRetry is the first wait between two attempts to write the
// session records again; it doubles up to resyncRetryMax.
const (
	resyncRetry    = 250 * time.Millisecond
	resyncRetryMax = 5 * time.Second
)

// resync writes the records of the sessions held here again, then
// re-reads openclaw.json and the policies, once the subscription is back
// after a lost connection. The subscription may come back before the
// client's pool dials again (go-redis's pool, after a run of failed dials,
// answers with the last dial error until a probe gets through), so a
// failed write is retried with backoff until it succeeds or ctx is done;
// the first failure of the run is logged, the last one's success too.
func (f *replicaFanOut) resync(ctx context.Context) {
	wait, failing := resyncRetry, false
	for {
		err := f.http.RewriteSessions(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if !failing {
			f.logger.Warn("replica: the records of the sessions held here were not written again; they cannot move until they are (retrying)", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, resyncRetryMax)
	}
	if failing {
		f.logger.Info("replica: the records of the sessions held here were written again")
	}
	f.apply(ctx, sharedstate.EventReload, sharedstate.EventPolicy)
}

// run subscribes to the other replicas' events until the returned stop
// is called (or ctx is done). After a lost connection to Redis the events
// published meanwhile are lost, so it then re-reads everything, and
// writes the records of the sessions held here again (a Redis restarted
// empty lost them).
func (f *replicaFanOut) run(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		f.shared.Subscribe(ctx, sharedstate.Subscriber{
			Event:  func(ev sharedstate.Event) { f.apply(ctx, ev.Kind) },
			Resync: func() { f.resync(ctx) },
			Error: func(err error) {
				f.logger.Warn("replica: changes on the other replicas are not received until Redis answers again", "err", err)
			},
		})
	})
	return func() { cancel(); wg.Wait() }
}
