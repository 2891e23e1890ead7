package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
	"github.com/sendonce/sendonce/store/postgres/pgtest"
)

// BenchmarkClaims: durable claims of distinct new keys by 1, 8, 32 and 64 concurrent
// clients (each with its own connection pool and prepared statements, as workstations'
// long-lived services are), reporting claims
// per second, the p99 and the serialization failures retried a claim: on an empty store, and on one that already holds 200,000 keys
// (a fleet's store after a while; its keys index then has thousands of pages, so two
// claims of distinct keys rarely read the same one). scripts/bench-postgres runs pgbench
// beside it, with the same client counts, on the same server, in the same run.
func BenchmarkClaims(b *testing.B) {
	for _, held := range []int{0, 200_000} {
		for _, clients := range []int{1, 8, 32, 64} {
			b.Run(fmt.Sprintf("keys=%d/clients=%d", held, clients), func(b *testing.B) { benchClaims(b, held, clients) })
		}
	}
}

// benchDatabase is initializedDatabase with SENDONCE_BENCH_URL_PARAMS added to the
// store's URL: scripts/bench-failover accepts its asynchronous pair's risk that way.
func benchDatabase(b *testing.B) string {
	b.Helper()
	u := pgtest.Database(b)
	if p := os.Getenv("SENDONCE_BENCH_URL_PARAMS"); p != "" {
		u += "&" + p
	}
	be, err := Create(context.Background(), u, Options{})
	if err != nil {
		b.Fatal(err)
	}
	be.Close()
	return u
}

func benchClaims(b *testing.B, held, clients int) {
	if os.Getenv("SENDONCE_TEST_POSTGRES") == "" {
		b.Fatal("no PostgreSQL: testbed/postgres up, and its state.env exported")
	}
	u := benchDatabase(b)
	ctx := context.Background()
	if held > 0 {
		populate(b, u, held)
	}
	stores := make([]*store.Store, clients)
	prof := &statementProfile{by: map[string]*statementTime{}} // counts the serialization failures
	for i := range stores {
		be, err := Open(ctx, u, Options{tracer: prof, PrepareStatements: true})
		if err != nil {
			b.Fatal(err)
		}
		be.db.SetMaxOpenConns(1)
		stores[i] = store.New(be)
		defer stores[i].Close()
	}
	id, _ := gate.Title("Bob")
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := b.N/clients + 1
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			mine := make([]time.Duration, 0, per)
			for i := 0; i < per; i++ {
				k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprintf("bench %d %d %d", clients, c, i))))
				t0 := time.Now()
				res, err := stores[c].Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: fmt.Sprint("w", c)})
				if err != nil || !res.Granted {
					b.Errorf("claim: %v", err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/took.Seconds(), "claims/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(prof.failures)/float64(len(lat)), "serialization-failures/claim")
}

// populate gives the store n keys of past deliveries, one intent each (no attempts: the
// claims measured never reach them, only the indexes they read).
func populate(b *testing.B, u string, n int) {
	db, err := sql.Open("pgx", u)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, st := range []string{
		`INSERT INTO sendonce.intents (id, created_at) SELECT -i, 0 FROM generate_series(1, $1) i`,
		`INSERT INTO sendonce.keys (key, intent_id, version, strength, bound_at)
			SELECT 'v2:title:Bob:' || md5(i::text) || md5((i * 7)::text), -i, 'v2', 'weak', 0 FROM generate_series(1, $1) i`,
	} {
		if _, err := db.Exec(st, n); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Exec("ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimProfile profiles a claim of a new key, one client: every round trip the
// store makes (a statement alone, or a pipelined batch such as BEGIN with the
// transaction's settings), how many a claim makes, and the time each takes, as the
// client waits for it; serialization failures retried are counted too. It logs a table
// (round trip, per claim, mean) and reports round trips and statements per claim
// (BEGIN and COMMIT apart).
func BenchmarkClaimProfile(b *testing.B) {
	if os.Getenv("SENDONCE_TEST_POSTGRES") == "" {
		b.Fatal("no PostgreSQL: testbed/postgres up, and its state.env exported")
	}
	u := initializedDatabase(b)
	ctx := context.Background()
	prof := &statementProfile{by: map[string]*statementTime{}}
	be, err := Open(ctx, u, Options{tracer: prof, PrepareStatements: true})
	if err != nil {
		b.Fatal(err)
	}
	s := store.New(be)
	defer s.Close()
	id, _ := gate.Title("Bob")
	prof.reset()
	claims := 0
	for i := 0; b.Loop(); i++ {
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint("profile ", i))))
		if res, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "profile"}); err != nil || !res.Granted {
			b.Fatalf("claim: %+v %v", res, err)
		}
		claims++
	}
	b.StopTimer()
	prof.mu.Lock()
	defer prof.mu.Unlock()
	names := slices.Collect(maps.Keys(prof.by))
	slices.SortFunc(names, func(x, y string) int { return cmp.Compare(prof.by[y].total, prof.by[x].total) })
	var trips int
	var waited time.Duration
	for _, n := range names {
		st := prof.by[n]
		trips += st.count
		waited += st.total
		if len(n) > 160 {
			n = n[:160] + "…"
		}
		b.Logf("%6.2f a claim, mean %7.1f µs: %s", float64(st.count)/float64(claims), float64(st.total.Microseconds())/float64(st.count), n)
	}
	b.Logf("%d claims: %.2f round trips a claim, %.0f µs a claim waiting on the server, %d serialization failures", claims, float64(trips)/float64(claims), float64(waited.Microseconds())/float64(claims), prof.failures)
	b.ReportMetric(float64(trips)/float64(claims), "round-trips/claim")
	b.ReportMetric(float64(prof.statements)/float64(claims), "statements/claim")
}

// statementProfile is a pgx.QueryTracer and pgx.BatchTracer that times each round
// trip: a statement sent alone (by its text, white space folded; BEGIN and COMMIT by
// name), or a pipelined batch (its statements' names joined by " + "). It counts the
// statements sent, BEGIN and COMMIT apart.
type statementProfile struct {
	mu         sync.Mutex
	by         map[string]*statementTime
	statements int
	failures   int
}

type statementTime struct {
	count int
	total time.Duration
}

type traceStart struct {
	names []string
	at    time.Time
}

type traceKey struct{}

func (p *statementProfile) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.by, p.statements, p.failures = map[string]*statementTime{}, 0, 0
}

// roundTrips is how many round trips were timed.
func (p *statementProfile) roundTrips() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, st := range p.by {
		n += st.count
	}
	return n
}

// statementName folds a statement's white space; BEGIN and COMMIT go by name.
func statementName(sql string) string {
	name := strings.Join(strings.Fields(sql), " ")
	switch upper := strings.ToUpper(name); {
	case strings.HasPrefix(upper, "BEGIN"):
		return "BEGIN"
	case strings.HasPrefix(upper, "COMMIT"):
		return "COMMIT"
	}
	return name
}

// sent counts a statement and its failure.
func (p *statementProfile) sent(name string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name != "BEGIN" && name != "COMMIT" {
		p.statements++
	}
	if retryable(err) {
		p.failures++
	}
}

// took records one round trip.
func (p *statementProfile) took(start traceStart) {
	name := strings.Join(start.names, " + ")
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.by[name]
	if st == nil {
		st = &statementTime{}
		p.by[name] = st
	}
	st.count++
	st.total += time.Since(start.at)
}

func (p *statementProfile) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, &traceStart{names: []string{statementName(data.SQL)}, at: time.Now()})
}

func (p *statementProfile) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if start, ok := ctx.Value(traceKey{}).(*traceStart); ok {
		p.sent(start.names[0], data.Err)
		p.took(*start)
	}
}

func (p *statementProfile) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, &traceStart{at: time.Now()})
}

func (p *statementProfile) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if start, ok := ctx.Value(traceKey{}).(*traceStart); ok {
		name := statementName(data.SQL)
		start.names = append(start.names, name)
		p.sent(name, data.Err)
	}
}

func (p *statementProfile) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	if start, ok := ctx.Value(traceKey{}).(*traceStart); ok {
		p.took(*start)
	}
}
