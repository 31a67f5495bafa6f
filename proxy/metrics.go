package proxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/bundle/bundlemetrics"
	"github.com/openclaw-go/openclaw/policies/decisionlog"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// Call outcomes, the values of the "outcome" label of
// openclaw_proxy_tool_calls_total.
const (
	// OutcomeOK is a call whose tool answered without isError.
	OutcomeOK = "ok"
	// OutcomeToolError is a call answered with isError by the tool, or by
	// the runtime for a server that is paused or not connected.
	OutcomeToolError = "tool_error"
	// OutcomeError is a call answered with a JSON-RPC error (unknown tool,
	// session closed, proxy shutting down).
	OutcomeError = "error"
	// OutcomeBlocked is a call the policies refused: a before_tool_call
	// block, or a require_approval that was not approved.
	OutcomeBlocked = "blocked"
)

// UnroutedTool is the "tool" label of a call that never reached the policy
// boundary (a name that is not in the catalog, a closed session): clients
// choose names freely, so they are not used as labels.
const UnroutedTool = "(unrouted)"

// Metrics records what the proxy does, for Prometheus: per-tool call counts
// by outcome, per-tool latency, policy decisions and the calls in flight.
// Its own registry also holds the Go runtime and process collectors (RSS,
// open files). It is safe for concurrent use.
//
// Wiring, in this order: wrap the runtime's policy interfaces with
// [Metrics.Enforcer], [Metrics.ApprovalDecider] and [Metrics.AskHuman] (so a block
// is told apart from a tool error), build the runtime session and the
// [Proxy], then call [Metrics.Instrument]. Serve [Metrics.Handler] on
// /metrics.
//
// The series, all with the prefix openclaw_:
//
//	proxy_tool_calls_total{tool,outcome}           counter; outcome is ok, tool_error, error or blocked
//	proxy_tool_call_duration_seconds{tool}         histogram of the whole tools/call, policies included
//	proxy_tool_calls_in_flight                     gauge
//	policy_decisions_total{hook,decision}          counter; before_tool_call: allow, block, require_approval;
//	                                               decide_approval: allow-once, allow-always, deny, ask
//	policy_module_decisions_total{hook,module,decision}  counter, fed by [Metrics.AuditSink]
//	upstream_skipped_lines_total{server}           counter; stdout lines of a stdio server that were not
//	                                               one JSON-RPC message, by [Metrics.ObserveServers]
//	proxy_notifications_dropped_total{kind}        counter; upstream notifications (message, progress) a
//	                                               client could not be given, by [Metrics.Instrument]
//	proxy_ready                                    gauge; 1 while /readyz answers 200, else 0, by
//	                                               [NewHTTPHandler]
//	proxy_draining                                 gauge; 1 once the drain on SIGTERM/SIGINT has begun
//	oauth_jwks_fetches_total{result}               counter; fetches of the --auth-issuer's JWKS, result ok
//	                                               or error, by [NewHTTPHandler] with HTTPOptions.OAuth
//	decision_log_events_total{result}              counter; audit records of the decision log shipper,
//	                                               result shipped or dropped, by [Metrics.ObserveDecisionLog]
//	decision_log_post_failures_total               counter; POSTs of a batch that failed (each retry counts)
//	decision_log_pending_events                    gauge; records buffered or in the batch being sent
//	state_redis_commands_total{op,result}          counter; commands sent to the --state Redis, by command
//	                                               (evalsha, publish, ping, …) and result ok or error, by
//	                                               [Metrics.ObserveState]
//	state_redis_command_duration_seconds{op}       histogram of those commands' round trips
//	policy_bundle_updates_total{outcome,reason}    counter, and policy_bundle_info{ref,digest,key,sequence}:
//	                                               the policy bundle's series ([bundlemetrics.Metrics]),
//	                                               by [Metrics.Bundle]
type Metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	inFlight  prometheus.Gauge
	decisions *prometheus.CounterVec
	modules   *prometheus.CounterVec
	bundles   *bundlemetrics.Metrics
}

// NewMetrics returns metrics with their own registry (never the global
// one, so two proxies in one process do not collide).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openclaw_proxy_tool_calls_total",
			Help: "tools/call requests answered by openclaw mcp proxy, by exposed tool name and outcome (ok, tool_error, error, blocked).",
		}, []string{"tool", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "openclaw_proxy_tool_call_duration_seconds",
			Help:    "Time to answer a tools/call, policies and the upstream call included, by exposed tool name.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"tool"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "openclaw_proxy_tool_calls_in_flight",
			Help: "tools/call requests being answered now.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openclaw_policy_decisions_total",
			Help: "Combined policy decisions, by hook (before_tool_call, decide_approval) and decision.",
		}, []string{"hook", "decision"}),
		modules: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openclaw_policy_module_decisions_total",
			Help: "Decisions of each policy module, from the decision audit records, by hook, module and decision.",
		}, []string{"hook", "module", "decision"}),
	}
	m.bundles = bundlemetrics.New(m.reg)
	m.reg.MustRegister(m.calls, m.latency, m.inFlight, m.decisions, m.modules,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveState adds the series of the --state Redis and returns the
// function that feeds them, for sharedstate.Options.Observe: each command
// (op, its name in lower case: a small fixed set), how long it took and
// whether it failed. Call it once.
func (m *Metrics) ObserveState() func(op string, took time.Duration, err error) {
	cmds := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openclaw_state_redis_commands_total",
		Help: "Commands sent to the --state Redis, by command (evalsha, publish, ping, ...) and result (ok, error).",
	}, []string{"op", "result"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "openclaw_state_redis_command_duration_seconds",
		Help:    "Round trip of a command to the --state Redis, failures included, by command.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	}, []string{"op"})
	m.reg.MustRegister(cmds, latency)
	return func(op string, took time.Duration, err error) {
		result := "ok"
		if err != nil {
			result = "error"
		}
		cmds.WithLabelValues(op, result).Inc()
		latency.WithLabelValues(op).Observe(took.Seconds())
	}
}

// ObserveServers adds the per-server series, read from status (the
// runtime session's Status) at every scrape:
// openclaw_upstream_skipped_lines_total{server}. Call it once.
func (m *Metrics) ObserveServers(status func() []runtime.ServerStatus) {
	m.reg.MustRegister(serverCollector{status})
}

var skippedLinesDesc = prometheus.NewDesc("openclaw_upstream_skipped_lines_total",
	"Lines of a stdio server's stdout skipped because they were not one JSON-RPC message (junk, over the size cap, cut off), by server.",
	[]string{"server"}, nil)

// serverCollector reports the servers' counters at scrape time.
type serverCollector struct{ status func() []runtime.ServerStatus }

func (c serverCollector) Describe(ch chan<- *prometheus.Desc) { ch <- skippedLinesDesc }

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.status() {
		if st.Kind == transport.KindStdio {
			ch <- prometheus.MustNewConstMetric(skippedLinesDesc, prometheus.CounterValue, float64(st.SkippedLines), st.Name)
		}
	}
}

var (
	readyDesc = prometheus.NewDesc("openclaw_proxy_ready",
		"1 while the proxy takes traffic (/readyz answers 200), else 0.", nil, nil)
	drainingDesc = prometheus.NewDesc("openclaw_proxy_draining",
		"1 once the proxy drains (SIGTERM or SIGINT): not ready, new sessions refused, requests in flight finishing.", nil, nil)
	jwksDesc = prometheus.NewDesc("openclaw_oauth_jwks_fetches_total",
		"Fetches of the OAuth issuer's JWKS (at start, on an unknown key id, after an hour), by result (ok, error).",
		[]string{"result"}, nil)
)

// observeReadiness adds openclaw_proxy_ready and openclaw_proxy_draining,
// read from readiness at every scrape.
func (m *Metrics) observeReadiness(readiness func() (map[string]string, bool)) error {
	return m.reg.Register(collectorFunc{descs: []*prometheus.Desc{readyDesc, drainingDesc}, collect: func(ch chan<- prometheus.Metric) {
		notReady, draining := readiness()
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, boolValue(notReady == nil))
		ch <- prometheus.MustNewConstMetric(drainingDesc, prometheus.GaugeValue, boolValue(draining))
	}})
}

// observeJWKS adds openclaw_oauth_jwks_fetches_total, read from v at every
// scrape.
func (m *Metrics) observeJWKS(v *OAuthVerifier) error {
	return m.reg.Register(collectorFunc{descs: []*prometheus.Desc{jwksDesc}, collect: func(ch chan<- prometheus.Metric) {
		ok, failed := v.JWKSFetches()
		ch <- prometheus.MustNewConstMetric(jwksDesc, prometheus.CounterValue, float64(ok), "ok")
		ch <- prometheus.MustNewConstMetric(jwksDesc, prometheus.CounterValue, float64(failed), "error")
	}})
}

var (
	decisionLogEventsDesc = prometheus.NewDesc("openclaw_decision_log_events_total",
		"Audit records of the decision log shipper (the policy file's decision_log), by result: shipped (the endpoint accepted them) or dropped (buffer full, refused for good, or left at shutdown).",
		[]string{"result"}, nil)
	decisionLogFailuresDesc = prometheus.NewDesc("openclaw_decision_log_post_failures_total",
		"POSTs of a decision log batch that failed; a batch is retried with backoff.", nil, nil)
	decisionLogPendingDesc = prometheus.NewDesc("openclaw_decision_log_pending_events",
		"Audit records waiting to be shipped: buffered or in the batch being sent.", nil, nil)
)

// ObserveDecisionLog adds the series of the decision log shipper, read
// from stats at every scrape: openclaw_decision_log_events_total{result},
// openclaw_decision_log_post_failures_total and
// openclaw_decision_log_pending_events. Call it once, when the policy
// file ships decisions.
func (m *Metrics) ObserveDecisionLog(stats func() decisionlog.Stats) {
	m.reg.MustRegister(collectorFunc{descs: []*prometheus.Desc{decisionLogEventsDesc, decisionLogFailuresDesc, decisionLogPendingDesc}, collect: func(ch chan<- prometheus.Metric) {
		st := stats()
		ch <- prometheus.MustNewConstMetric(decisionLogEventsDesc, prometheus.CounterValue, float64(st.Shipped), "shipped")
		ch <- prometheus.MustNewConstMetric(decisionLogEventsDesc, prometheus.CounterValue, float64(st.Dropped), "dropped")
		ch <- prometheus.MustNewConstMetric(decisionLogFailuresDesc, prometheus.CounterValue, float64(st.Failures))
		ch <- prometheus.MustNewConstMetric(decisionLogPendingDesc, prometheus.GaugeValue, float64(st.Pending))
	}})
}

// collectorFunc is a collector whose series are read at scrape time.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// boolValue is 1 for true, 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Registry returns the registry the metrics are in, to add collectors of
// one's own or to gather in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text exposition format (or
// OpenMetrics when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Instrument adds the receiving middleware that measures every tools/call
// of p's server, and the series of the notifications p could not relay
// (openclaw_proxy_notifications_dropped_total{kind}). Call it once per
// proxy.
func (m *Metrics) Instrument(p *Proxy) {
	p.use(m.middleware)
	m.reg.MustRegister(dropCollector{p})
}

var droppedDesc = prometheus.NewDesc("openclaw_proxy_notifications_dropped_total",
	"Upstream notifications the proxy could not relay to the client they were for (its session or its call's stream had ended), by kind (message, progress).",
	[]string{"kind"}, nil)

// dropCollector reports Proxy.NotificationsDropped at scrape time.
type dropCollector struct{ p *Proxy }

func (c dropCollector) Describe(ch chan<- *prometheus.Desc) { ch <- droppedDesc }

func (c dropCollector) Collect(ch chan<- prometheus.Metric) {
	logs, progress := c.p.NotificationsDropped()
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(logs), "message")
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(progress), "progress")
}

// callMark travels in a call's context from the middleware to the policy
// wrappers, which note what the policies said.
type callMark struct {
	mu       sync.Mutex
	routed   bool // before_tool_call ran: the name is in the catalog
	refused  bool // blocked, or an approval denied
	approval bool // require_approval, not yet allowed by decide_approval
}

type callMarkKey struct{}

func markOf(ctx context.Context) *callMark {
	cm, _ := ctx.Value(callMarkKey{}).(*callMark)
	return cm
}

func (m *Metrics) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		cm := &callMark{}
		m.inFlight.Inc()
		start := time.Now()
		res, err := next(context.WithValue(ctx, callMarkKey{}, cm), method, req)
		elapsed := time.Since(start).Seconds()
		m.inFlight.Dec()

		cm.mu.Lock()
		routed, refused, approval := cm.routed, cm.refused, cm.approval
		cm.mu.Unlock()
		tool := UnroutedTool
		if ctr, ok := req.(*mcp.CallToolRequest); ok && routed && ctr.Params != nil {
			tool = ctr.Params.Name
		}
		outcome := OutcomeOK
		switch r, _ := res.(*mcp.CallToolResult); {
		case err != nil:
			outcome = OutcomeError
		case r != nil && r.IsError && (refused || approval):
			// Refused, or a require_approval nobody approved (no one
			// to ask, or an answer that never came).
			outcome = OutcomeBlocked
		case r != nil && r.IsError:
			outcome = OutcomeToolError
		}
		m.calls.WithLabelValues(tool, outcome).Inc()
		m.latency.WithLabelValues(tool).Observe(elapsed)
		return res, err
	}
}

// Enforcer returns e counting its decisions (hook before_tool_call) and
// marking the calls the proxy measures. Hand the result to
// runtime.Options.Enforcer; a nil e gives nil, so runtime.New still refuses
// a session without a before_tool_call policy.
func (m *Metrics) Enforcer(e policies.Enforcer) policies.Enforcer {
	if e == nil {
		return nil
	}
	return &countingEnforcer{m: m, next: e}
}

type countingEnforcer struct {
	m    *Metrics
	next policies.Enforcer
}

func (c *countingEnforcer) BeforeToolCall(ctx context.Context, call *policies.ToolCall) policies.Outcome {
	d := c.next.BeforeToolCall(ctx, call)
	c.m.decisions.WithLabelValues(string(policies.HookBeforeToolCall), string(d.Decision)).Inc()
	if cm := markOf(ctx); cm != nil {
		cm.mu.Lock()
		cm.routed = true
		switch d.Decision {
		case policies.Allow:
		case policies.RequireApproval:
			cm.approval = true
		default:
			cm.refused = true
		}
		cm.mu.Unlock()
	}
	return d
}

// ApprovalDecider returns d counting its decisions (hook decide_approval) and
// marking the calls the proxy measures. Hand the result to
// runtime.Options.ApprovalDecider; a nil d gives nil.
func (m *Metrics) ApprovalDecider(d policies.ApprovalDecider) policies.ApprovalDecider {
	if d == nil {
		return nil
	}
	return &countingApprovals{m: m, next: d}
}

type countingApprovals struct {
	m    *Metrics
	next policies.ApprovalDecider
}

func (c *countingApprovals) DecideApproval(ctx context.Context, req *policies.ApprovalRequest) policies.ApprovalOutcome {
	out := c.next.DecideApproval(ctx, req)
	c.m.decisions.WithLabelValues(string(policies.HookDecideApproval), string(out.Decision)).Inc()
	if cm := markOf(ctx); cm != nil {
		cm.mu.Lock()
		switch out.Decision {
		case policies.AllowOnce, policies.AllowAlways:
			cm.approval = false
		case policies.Ask:
		default:
			cm.refused = true
		}
		cm.mu.Unlock()
	}
	return out
}

// AskHuman returns f marking, for the calls the proxy measures, whether the
// human (or the client, through elicitation) approved a require_approval:
// a call refused here is counted as blocked, one approved runs and is
// counted by its result. Wrap runtime.Options.AskHuman with it, after
// anything that sets that field (Relay.Install); a nil f gives nil.
func (m *Metrics) AskHuman(f runtime.ApprovalFunc) runtime.ApprovalFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, req *runtime.ApprovalRequest) (bool, error) {
		ok, err := f(ctx, req)
		if cm := markOf(ctx); cm != nil {
			cm.mu.Lock()
			if ok && err == nil {
				cm.approval = false
			} else {
				cm.refused = true
			}
			cm.mu.Unlock()
		}
		return ok, err
	}
}

// Bundle returns the policy bundle's series, for the process's bundle
// follower.
func (m *Metrics) Bundle() *bundlemetrics.Metrics { return m.bundles }

// AuditSink returns a sink that counts every audit record in
// openclaw_policy_module_decisions_total and passes it on to next (nil:
// to nobody). It is the seam for the policy engine's audit records
// (engine.Options.Audit).
func (m *Metrics) AuditSink(next policies.AuditSink) policies.AuditSink {
	return auditTee{m: m, next: next}
}

type auditTee struct {
	m    *Metrics
	next policies.AuditSink
}

func (a auditTee) Record(rec policies.AuditRecord) {
	decision := rec.Decision
	if decision == "" && rec.Error != "" {
		decision = "error"
	}
	a.m.modules.WithLabelValues(string(rec.Hook), rec.Module, decision).Inc()
	if a.next != nil {
		a.next.Record(rec)
	}
}
