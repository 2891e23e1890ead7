package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// BenchmarkClaim measures one uncontended, durable claim (BEGIN IMMEDIATE, the rules,
// the attempt and its events, a synchronous FULL commit) of a new key: its ns/op is the
// claim latency and its claims/s the rate of durable distinct-key claims.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	be, err := Create(ctx, filepath.Join(b.TempDir(), "s.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	s := store.New(be)
	defer s.Close()
	id, _ := gate.Title("Bob")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
		if _, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkFsync is this disk's fsync rate in the same folder kind, for comparison: a
// durable claim cannot be faster than the fsyncs its commit needs.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	for i := 0; b.Loop(); i++ {
		if _, err := f.WriteAt(page, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}
