package service

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// metrics counts what the service decided, in Prometheus's text format.
type metrics struct {
	mu        sync.Mutex
	requests  map[string]int // by status code and kind
	grants    int
	refusals  map[string]int // by kind
	replays   int
	running   int
	delivered map[string]int // deliveries ended, by outcome
	durSum    float64
	buckets   []float64
	counts    []int
	durCount  int
}

func (m *metrics) init() {
	m.requests, m.refusals, m.delivered = map[string]int{}, map[string]int{}, map[string]int{}
	m.buckets = []float64{1, 2, 5, 10, 20, 30, 60, 120, 300}
	m.counts = make([]int, len(m.buckets))
}

func (m *metrics) request(status int, kind string, replayed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[fmt.Sprintf("code=%q", fmt.Sprint(status))]++
	if kind != "" && !replayed {
		m.refusals[kind]++
	}
}

func (m *metrics) granted()  { m.mu.Lock(); m.grants++; m.mu.Unlock() }
func (m *metrics) replayed() { m.mu.Lock(); m.replays++; m.mu.Unlock() }
func (m *metrics) deliveryStarted() {
	m.mu.Lock()
	m.running++
	m.mu.Unlock()
}

func (m *metrics) inFlight() int { m.mu.Lock(); defer m.mu.Unlock(); return m.running }

func (m *metrics) deliveryEnded(outcome string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running--
	if outcome == "" {
		outcome = "error"
	}
	m.delivered[outcome]++
	sec := d.Seconds()
	m.durSum += sec
	m.durCount++
	for i, b := range m.buckets {
		if sec <= b {
			m.counts[i]++
		}
	}
}

func (m *metrics) text() string {
	// The service's own health, read before the lock (ReadMemStats stops the world),
	// by the names Prometheus's Go client gives them: goroutines and heap that grow
	// with the deliveries served are a leak.
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	goroutines := runtime.NumGoroutine()
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	counter := func(name, help string, byLabel map[string]int, label string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		keys := make([]string, 0, len(byLabel))
		for k := range byLabel {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if label == "" {
				fmt.Fprintf(&b, "%s{%s} %d\n", name, k, byLabel[k])
			} else {
				fmt.Fprintf(&b, "%s{%s=%q} %d\n", name, label, k, byLabel[k])
			}
		}
	}
	counter("sendonce_http_requests_total", "HTTP requests answered, by status code.", m.requests, "")
	fmt.Fprintf(&b, "# HELP sendonce_grants_total Claims granted.\n# TYPE sendonce_grants_total counter\nsendonce_grants_total %d\n", m.grants)
	counter("sendonce_refusals_total", "Requests refused, by kind (consumed, held, crossed, stale, bad_input, fail_closed, ...).", m.refusals, "kind")
	fmt.Fprintf(&b, "# HELP sendonce_fail_closed_total Requests refused because the store could not be trusted or reached.\n# TYPE sendonce_fail_closed_total counter\nsendonce_fail_closed_total %d\n", m.refusals["fail_closed"])
	fmt.Fprintf(&b, "# HELP sendonce_replays_total Responses replayed for a repeated Idempotency-Key.\n# TYPE sendonce_replays_total counter\nsendonce_replays_total %d\n", m.replays)
	fmt.Fprintf(&b, "# HELP sendonce_deliveries_in_flight Deliveries running now.\n# TYPE sendonce_deliveries_in_flight gauge\nsendonce_deliveries_in_flight %d\n", m.running)
	counter("sendonce_deliveries_total", "Deliveries ended, by outcome.", m.delivered, "outcome")
	fmt.Fprintf(&b, "# HELP sendonce_delivery_duration_seconds How long deliveries took.\n# TYPE sendonce_delivery_duration_seconds histogram\n")
	for i, le := range m.buckets {
		fmt.Fprintf(&b, "sendonce_delivery_duration_seconds_bucket{le=\"%g\"} %d\n", le, m.counts[i])
	}
	fmt.Fprintf(&b, "sendonce_delivery_duration_seconds_bucket{le=\"+Inf\"} %d\nsendonce_delivery_duration_seconds_sum %g\nsendonce_delivery_duration_seconds_count %d\n", m.durCount, m.durSum, m.durCount)
	fmt.Fprintf(&b, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", goroutines)
	fmt.Fprintf(&b, "# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.\n# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes %d\n", mem.HeapInuse)
	return b.String()
}
