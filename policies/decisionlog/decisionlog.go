// Package decisionlog ships the policy engine's audit records off the
// machine: batches of events, close to OPA's decision logs, POSTed as a
// gzipped JSON array to an HTTP endpoint (docs/policy-file.md, "Decision
// log shipping").
//
// A [Shipper] is a policies.AuditSink whose Record never blocks: it puts
// the record in a bounded buffer, or drops and counts it when the buffer
// is full. One goroutine takes the records out, encodes each event with
// [policies.AuditRecord.AppendJSON] (the one encoding of a record, the
// local log's), sends a batch when it is full or FlushInterval passed, and
// retries a batch that failed with exponential backoff (with jitter) while
// the buffer takes the new records. Close sends what is buffered, within
// its context.
package decisionlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openclaw-go/openclaw/internal/jsonw"
	"github.com/openclaw-go/openclaw/policies"
)

// Defaults of [Options].
const (
	DefaultBufferEvents   = 10000
	DefaultBatchEvents    = 500
	DefaultFlushInterval  = time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultReportInterval = time.Minute
)

// PathPrefix starts the path of every event: "openclaw/" and the hook of
// its record (OPA's path is the rule queried; ours is the decision point).
const PathPrefix = "openclaw/"

// Options configure [New]. URL is required; zero fields are the defaults.
type Options struct {
	// URL receives the batches: POST, Content-Type application/json,
	// Content-Encoding gzip.
	URL string
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
	// Client sends the batches; nil means a client of its own with
	// http.DefaultTransport's settings (set its TLS configuration for a
	// private certificate authority). Redirects are never followed, even
	// when Client's CheckRedirect would: a 3xx answer drops the batch.
	Client *http.Client
	// Labels go in every event's "labels" (OPA's), with "id" (this
	// Shipper's, unless Labels has one).
	Labels map[string]string
	// BufferEvents bounds the records waiting to be shipped, beside the
	// batch being sent; a record over it is dropped and counted.
	BufferEvents int
	// BatchEvents is the most events in one POST.
	BatchEvents int
	// FlushInterval is the longest a record waits for its batch to fill.
	FlushInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before a batch is sent
	// again: it doubles from MinBackoff after each failure, up to
	// MaxBackoff, each wait drawn at random between its half and itself.
	MinBackoff, MaxBackoff time.Duration
	// RequestTimeout bounds one POST.
	RequestTimeout time.Duration
	// ReportInterval is the least time between two lines of Logger about
	// dropped records.
	ReportInterval time.Duration
	// Logger says that records were dropped (at most once per
	// ReportInterval) and why a batch failed; nil discards.
	Logger *slog.Logger
}

// Stats are a Shipper's counters since New.
type Stats struct {
	// Shipped counts the events the endpoint accepted (a 2xx answer).
	Shipped uint64
	// Dropped counts the records not shipped: the buffer was full, the
	// endpoint refused their batch for good (a 4xx answer other than 408
	// and 429), or Close's context ended before they were sent.
	Dropped uint64
	// Failures counts the POSTs that failed (each retried batch counts
	// once per attempt).
	Failures uint64
	// Pending is the number of records buffered or in the batch being
	// sent.
	Pending int
}

// Shipper ships audit records; it implements policies.AuditSink. It is
// safe for concurrent use.
type Shipper struct {
	opts   Options
	labels []byte // the encoded "labels" member's value
	ch     chan policies.AuditRecord

	mu     sync.RWMutex // held for reading by Record, for writing by Close
	closed bool

	shipped, dropped, failures atomic.Uint64
	inFlight                   atomic.Int64

	stop    chan struct{}                   // closed by Close
	drainBy atomic.Pointer[context.Context] // Close's context, set before stop is closed
	done    chan struct{}                   // closed when the loop has returned

	reported uint64 // drops said so far (loop only)
	lastSaid time.Time
	failing  bool // a batch failed since the last one shipped (loop only)

	raw []byte       // the JSON of the batch being sent (loop only)
	out bytes.Buffer // its gzip (loop only)
	zw  *gzip.Writer
}

// New starts a Shipper. It fails when the URL is not an http(s) URL.
func New(opts Options) (*Shipper, error) {
	if !strings.HasPrefix(opts.URL, "https://") && !strings.HasPrefix(opts.URL, "http://") {
		return nil, fmt.Errorf("decisionlog: url %q: want an http(s) URL", opts.URL)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&opts.BufferEvents, DefaultBufferEvents)
	def(&opts.BatchEvents, DefaultBatchEvents)
	defDur(&opts.FlushInterval, DefaultFlushInterval)
	defDur(&opts.MinBackoff, DefaultMinBackoff)
	defDur(&opts.MaxBackoff, DefaultMaxBackoff)
	defDur(&opts.RequestTimeout, DefaultRequestTimeout)
	defDur(&opts.ReportInterval, DefaultReportInterval)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// A followed 301/302 would turn the POST into a GET whose 200 counts
	// the batch as shipped; a 307 could send it on to a URL the http-only-
	// to-loopback check never saw.
	client := *opts.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.Client = &client
	s := &Shipper{opts: opts, ch: make(chan policies.AuditRecord, opts.BufferEvents),
		stop: make(chan struct{}), done: make(chan struct{})}
	s.labels = encodeLabels(opts.Labels, policies.ProcessID())
	go s.loop()
	return s, nil
}

// Record buffers r for shipping, or drops and counts it when the buffer is
// full or the Shipper is closed. It never blocks.
func (s *Shipper) Record(r policies.AuditRecord) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		s.dropped.Add(1)
		return
	}
	select {
	case s.ch <- r:
	default:
		s.dropped.Add(1)
	}
	s.mu.RUnlock()
}

// Stats returns the counters.
func (s *Shipper) Stats() Stats {
	return Stats{Shipped: s.shipped.Load(), Dropped: s.dropped.Load(), Failures: s.failures.Load(),
		Pending: len(s.ch) + int(s.inFlight.Load())}
}

// Close stops taking records and sends those buffered, retrying until ctx
// ends; what is left then is dropped, counted and said. It returns an
// error naming the number of records dropped at Close, nil when every
// buffered record was shipped. A second Close returns nil at once.
func (s *Shipper) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	before := s.dropped.Load()
	s.drainBy.Store(&ctx)
	close(s.stop)
	<-s.done
	if n := s.dropped.Load() - before; n > 0 {
		return fmt.Errorf("decisionlog: %d decisions not shipped to %s before shutdown", n, s.opts.URL)
	}
	return nil
}

// loop batches the records and sends the batches.
func (s *Shipper) loop() {
	defer close(s.done)
	batch := make([]policies.AuditRecord, 0, s.opts.BatchEvents)
	tick := time.NewTicker(s.opts.FlushInterval)
	defer tick.Stop()
	flush := func() {
		if len(batch) > 0 {
			s.send(batch)
			batch = batch[:0]
		}
	}
	add := func(r policies.AuditRecord) {
		batch = append(batch, r)
		s.inFlight.Store(int64(len(batch)))
		if len(batch) >= s.opts.BatchEvents {
			flush()
		}
	}
	for {
		select {
		case r := <-s.ch:
			add(r)
		case <-tick.C:
			flush()
			s.sayDrops(false)
		case <-s.stop:
			// The buffer takes no more records (Close held mu): send
			// what it has.
			for drained := false; !drained; {
				select {
				case r := <-s.ch:
					add(r)
				default:
					drained = true
				}
			}
			flush()
			s.sayDrops(true)
			return
		}
	}
}

// send ships batch, retrying with backoff until it is accepted, refused
// for good, or the Shipper is closing and Close's context has ended.
func (s *Shipper) send(batch []policies.AuditRecord) {
	defer s.inFlight.Store(0)
	body := s.encode(batch)
	backoff := s.opts.MinBackoff
	for {
		err := s.post(body)
		if err == nil {
			s.shipped.Add(uint64(len(batch)))
			if s.failing {
				s.failing = false
				s.opts.Logger.Info("openclaw: decision log: the endpoint takes batches again", "url", s.opts.URL)
			}
			return
		}
		s.failures.Add(1)
		var perm *permanentError
		if errors.As(err, &perm) {
			s.dropped.Add(uint64(len(batch)))
			s.opts.Logger.Error("openclaw: decision log: the endpoint refused a batch; its decisions are dropped", "url", s.opts.URL, "events", len(batch), "err", err)
			return
		}
		if !s.failing {
			// Said once per outage; the retries are counted (Failures).
			s.failing = true
			s.opts.Logger.Warn("openclaw: decision log: a batch was not shipped; retrying with backoff, decisions are buffered", "url", s.opts.URL, "events", len(batch), "err", err)
		}
		s.sayDrops(false)
		wait := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-wait.C:
		case <-s.stop:
			// Closing: keep retrying, within Close's context.
			drainBy := *s.drainBy.Load()
			select {
			case <-wait.C:
			case <-drainBy.Done():
				wait.Stop()
				s.dropped.Add(uint64(len(batch)))
				return
			}
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// permanentError is an answer that sending again would not change.
type permanentError struct {
	status   int
	location string // a 3xx's Location
}

func (e *permanentError) Error() string {
	if e.location != "" {
		return fmt.Sprintf("HTTP %d to %s (redirects are not followed: set decision_log.url to the endpoint itself)", e.status, e.location)
	}
	return fmt.Sprintf("HTTP %d", e.status)
}

// post sends one gzipped batch.
func (s *Shipper) post(body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
	defer cancel()
	if p := s.drainBy.Load(); p != nil {
		stop := context.AfterFunc(*p, cancel)
		defer stop()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.URL, bytes.NewReader(body))
	if err != nil {
		return &permanentError{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	if s.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.Token)
	}
	res, err := s.opts.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return nil
	case res.StatusCode == http.StatusRequestTimeout || res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500:
		return fmt.Errorf("HTTP %d", res.StatusCode)
	}
	return &permanentError{status: res.StatusCode, location: res.Header.Get("Location")}
}

// encode returns batch as the gzipped JSON array of its events (gzip's
// fastest level: the batches are JSON that compresses well at any level,
// and the shipper's CPU is taken from the calls). The bytes are valid
// until the next encode.
func (s *Shipper) encode(batch []policies.AuditRecord) []byte {
	raw := append(s.raw[:0], '[')
	for i := range batch {
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = AppendEvent(raw, s.labels, &batch[i])
	}
	raw = append(raw, ']')
	s.out.Reset()
	if s.zw == nil {
		s.zw, _ = gzip.NewWriterLevel(&s.out, gzip.BestSpeed) // a valid level: no error
	} else {
		s.zw.Reset(&s.out)
	}
	_, _ = s.zw.Write(raw) // a bytes.Buffer does not fail
	_ = s.zw.Close()
	if cap(raw) <= 4<<20 {
		s.raw = raw // kept for the next batch unless a huge one
	}
	return s.out.Bytes()
}

// AppendEvent appends the event of r: labels (an encoded JSON object),
// decision_id, path (PathPrefix and the hook), timestamp (RFC 3339 with
// nanoseconds), result (the decision) and record, the audit record as the
// local log writes it.
func AppendEvent(buf, labels []byte, r *policies.AuditRecord) []byte {
	o := jsonw.NewObject(buf)
	o.Raw("labels", labels)
	o.Str("decision_id", r.DecisionID)
	o.Str("path", PathPrefix+string(r.Hook))
	o.Key("timestamp")
	o.Buf = append(o.Buf, '"')
	o.Buf = r.Time.UTC().AppendFormat(o.Buf, time.RFC3339Nano)
	o.Buf = append(o.Buf, '"')
	o.Str("result", r.Decision)
	o.Key("record")
	o.Buf = r.AppendJSON(o.Buf)
	return o.Close()
}

// encodeLabels encodes labels with "id" set to id unless labels has one.
func encodeLabels(labels map[string]string, id string) []byte {
	o := jsonw.NewObject(nil)
	if _, ok := labels["id"]; !ok {
		o.Str("id", id)
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		o.Str(k, labels[k])
	}
	return o.Close()
}

// sayDrops logs the records dropped since the last line, at most once per
// ReportInterval (always when final).
func (s *Shipper) sayDrops(final bool) {
	n := s.dropped.Load()
	if n == s.reported || (!final && time.Since(s.lastSaid) < s.opts.ReportInterval) {
		return
	}
	s.opts.Logger.Error("openclaw: decision log: decisions were dropped, not shipped (buffer full, endpoint refusing or unreachable, or shutdown); the local audit log has them",
		"url", s.opts.URL, "dropped", n-s.reported, "dropped_total", n, "buffer_events", s.opts.BufferEvents)
	s.reported, s.lastSaid = n, time.Now()
}
