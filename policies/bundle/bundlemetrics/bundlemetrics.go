// Package bundlemetrics holds the Prometheus series of a process that
// follows a signed policy bundle (--policy-bundle, docs/policy-bundles.md):
// the bundle running now and every bundle accepted, swapped in or refused,
// with the refusal's reason. `openclaw mcp proxy` and `openclaw mcp serve`
// serve them on /metrics.
package bundlemetrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the series of one process, on the registry given to [New]:
//
//	openclaw_policy_bundle_updates_total{outcome,reason}       counter; outcome accepted, swapped or refused;
//	                                                           reason the refusal's (unsigned, bad_signature,
//	                                                           digest_mismatch, invalid_bundle, rollback,
//	                                                           test_failed, module_load), "" otherwise
//	openclaw_policy_bundle_info{ref,digest,key,sequence}       gauge, 1: the bundle deciding now (its tag
//	                                                           reference, manifest digest, the path of the
//	                                                           trusted key that verified it and its signature's
//	                                                           sequence); absent before one is accepted
//
// It is safe for concurrent use.
type Metrics struct {
	updates *prometheus.CounterVec
	info    *infoCollector
}

// New returns the series, registered on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openclaw_policy_bundle_updates_total",
			Help: "Policy bundles (--policy-bundle) accepted, swapped in or refused, by outcome and refusal reason (unsigned, bad_signature, digest_mismatch, invalid_bundle, rollback, test_failed, module_load).",
		}, []string{"outcome", "reason"}),
		info: &infoCollector{desc: prometheus.NewDesc("openclaw_policy_bundle_info",
			"The policy bundle deciding now: its tag reference, manifest digest, the trusted key that verified it and its signature's sequence.",
			[]string{"ref", "digest", "key", "sequence"}, nil)},
	}
	reg.MustRegister(m.updates, m.info)
	return m
}

// Observe counts a bundle event: outcome is accepted, swapped or refused;
// reason is the refusal's reason ("" otherwise).
func (m *Metrics) Observe(outcome, reason string) {
	m.updates.WithLabelValues(outcome, reason).Inc()
}

// Running makes the bundle of digest, from the tag reference ref, verified
// by the key at keyPath with signature sequence sequence, the one
// openclaw_policy_bundle_info shows.
func (m *Metrics) Running(ref, digest, keyPath string, sequence int64) {
	m.info.mu.Lock()
	m.info.labels = []string{ref, digest, keyPath, strconv.FormatInt(sequence, 10)}
	m.info.mu.Unlock()
}

// infoCollector is openclaw_policy_bundle_info: one series, replaced as a
// whole, so that a scrape never sees two bundles or none mid-swap.
type infoCollector struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	labels []string // nil before a bundle is running
}

func (c *infoCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *infoCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	labels := c.labels
	c.mu.Unlock()
	if labels != nil {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, labels...)
	}
}
