//go:build unix

package sqlite

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/store"
)

// BenchmarkClaim measures one uncontended, durable claim (BEGIN IMMEDIATE, the rules,
// the attempt and its events, a synchronous FULL commit) of a new key: its ns/op is the
// claim latency and its claims/s the rate of durable distinct-key claims; p50 and p99
// are of single claims. It refuses a folder in memory (tmpfs), where an fsync costs
// nothing, and logs the filesystem and PRAGMA synchronous beside the figures.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	dir := diskFolder(b)
	path := filepath.Join(dir, "s.db")
	be, err := Create(ctx, path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var sync int
	if err := be.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		b.Fatal(err)
	}
	b.Logf("store in %s (%s), PRAGMA synchronous = %d (2 is FULL)", dir, filesystem(b, dir), sync)
	s := store.New(be)
	defer s.Close()
	id, _ := gate.Title("Bob")
	var took []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
		start := time.Now()
		if _, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "bench"}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	reportPercentiles(b, took)
	if fi, err := os.Stat(path + "-wal"); err == nil {
		b.ReportMetric(float64(fi.Size())/1024, "wal-KiB")
	}
}

// BenchmarkClaimPages counts the pages a claim of a new key writes: the frames its
// commit appends to the WAL (each a page, written as a frame header and the page),
// and logs which table or index each page belongs to. It holds the checkpointer back while it runs, so that the
// WAL keeps every claim's frames, and reads them back from the file.
func BenchmarkClaimPages(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "s.db")
	be, err := Create(ctx, path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	be.checkpoints.every = math.MaxInt64
	s := store.New(be)
	defer s.Close()
	id, _ := gate.Title("Bob")
	for i := 0; b.Loop(); i++ {
		k := gate.NewKey(id, gate.DigestOf([]byte(fmt.Sprint(i))))
		if _, err := s.Claim(ctx, store.ClaimRequest{Keys: []gate.Key{k}, Task: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	owner := map[uint32]string{1: "page 1 (the file's header and sqlite_schema)"}
	rows, err := be.conn.QueryContext(ctx, "SELECT name, pageno FROM dbstat WHERE pageno != 1")
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var name string
		var page uint32
		if err := rows.Scan(&name, &page); err != nil {
			b.Fatal(err)
		}
		owner[page] = name
	}
	rows.Close()
	wal, err := os.ReadFile(path + "-wal")
	if err != nil {
		b.Fatal(err)
	}
	// A WAL is a 32-byte header, then frames: a 24-byte header (the page's number, and
	// for a transaction's last frame the file's size in pages) and the page.
	const frame = 24 + pageSize
	// The first commit is the store's creation; the claims' follow it.
	var frames, commits int
	byOwner := map[string]int{}
	created := false
	for off := 32; off+frame <= len(wal); off += frame {
		last := binary.BigEndian.Uint32(wal[off+4:]) != 0
		if !created {
			created = last
			continue
		}
		frames++
		byOwner[cmp.Or(owner[binary.BigEndian.Uint32(wal[off:])], "a page freed since")]++
		if last {
			commits++
		}
	}
	if commits != b.N {
		b.Fatalf("%d commits after the store's creation in the WAL, want one a claim (%d)", commits, b.N)
	}
	b.ReportMetric(float64(frames)/float64(commits), "pages/claim")
	names := slices.Sorted(maps.Keys(byOwner))
	for _, name := range names {
		b.Logf("%-45s %5.2f pages a claim", name, float64(byOwner[name])/float64(commits))
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFsync is this disk's fsync rate in the same folder, for comparison: a
// durable claim cannot be faster than the fsyncs its commit needs.
func BenchmarkFsync(b *testing.B) {
	dir := diskFolder(b)
	b.Logf("fsyncs in %s (%s)", dir, filesystem(b, dir))
	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if _, err := f.WriteAt(page, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
	reportPercentiles(b, took)
}

// reportPercentiles adds the median and the 99th percentile of single operations.
func reportPercentiles(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

// diskFolder is a new folder for a benchmark's files: under SENDONCE_BENCH_DIR if set,
// else the test's temporary folder; one in memory is refused.
func diskFolder(b *testing.B) string {
	dir := b.TempDir()
	if root := os.Getenv("SENDONCE_BENCH_DIR"); root != "" {
		var err error
		if dir, err = os.MkdirTemp(root, "bench"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	if fs := filesystem(b, dir); fs == "tmpfs" {
		b.Fatalf("%s is in memory (tmpfs): an fsync there costs nothing; set SENDONCE_BENCH_DIR to a folder on the store's disk", dir)
	}
	return dir
}

// filesystem names the filesystem a folder is on, as far as the benchmarks care.
func filesystem(b *testing.B, dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		b.Fatal(err)
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("filesystem type %#x", st.Type)
}
