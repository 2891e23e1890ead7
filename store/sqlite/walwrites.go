package sqlite

import (
	"fmt"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// A commit appends its pages to the WAL as frames, each one two writes (a 24-byte
// header, then the page), and then syncs the WAL once. A claim appends about sixteen
// frames: 33 writes, each a system call. The gathering VFS is SQLite's own unix VFS
// with one change: a WAL's writes are held in memory, in order, and handed to the file
// as one write when anything else is asked of the WAL (a sync, a read, its size, a
// truncation, a file control, a write that does not continue the run) or the run
// reaches walGatherMax, and at the latest before the connection releases its write
// lock on the WAL: it holds nothing back once another may write. The sync that makes
// a commit durable still follows every byte of it.
//
// That is safe only where every commit syncs the WAL: SQLite makes a commit's frames
// visible to other connections (in the WAL index) right after writing them, and syncs
// them first only under synchronous FULL or EXTRA. Under NORMAL or OFF a reader could
// be shown frames still in this process's memory, so open uses the gathering VFS only
// with FULL or EXTRA, and no connection of the backend changes PRAGMA synchronous (nor
// locking_mode: see dbShmLock).
//
// Files are opened by the unix VFS in place; a WAL and a main database file then get a
// copy of the unix VFS's methods with the few above replaced, each calling the unix
// method it replaces. What a crash loses of held writes is what SQLite alone would have
// lost: frames of a commit that had not synced, which no one was told of.

// gatherVFSName is the name the gathering VFS is registered under.
const gatherVFSName = "sendonce-unix-gather"

// walGatherMax is the most a WAL's held writes come to before they are written out: a
// claim's commit is about 17 KiB, and the unix VFS writes at most 128 KiB - 1 in one
// call (it takes a shorter write for a full disk).
const walGatherMax = 64 << 10

// gatherVFS is the registered VFS: which files it holds writes for and how to reach the
// unix VFS's own methods. SQLite's registry of VFSs is process-wide, so there is one,
// set up on first use.
type gatherVFS struct {
	unix uintptr // SQLite's unix VFS

	mu sync.Mutex
	// walTables and dbTables are the patched method tables this VFS gives WALs and main
	// database files, one for each unix table they copy (on Linux the unix VFS gives
	// WALs one table and database files another), and unpatched the unix table each
	// patched one copies.
	walTables, dbTables map[uintptr]uintptr // unix table -> patched copy
	unpatched           map[uintptr]uintptr // patched copy -> unix table
	// wals are the open WALs' held writes and dbs the open main database files' paths,
	// by the address of their sqlite3_file.
	wals map[uintptr]*heldWrites
	dbs  map[uintptr]string
}

// heldWrites are one WAL's writes not yet handed to the file: n bytes at mem, to go at
// offset start.
type heldWrites struct {
	path  string      // the WAL's path: its database's path and "-wal"
	unix  unixMethods // the WAL's own methods, which the patched ones call
	mem   uintptr     // walGatherMax bytes of C memory
	start int64
	n     int64
}

var (
	registerGatherVFS sync.Once
	theGatherVFS      *gatherVFS
	gatherVFSErr      error
)

// useGatherVFS registers the gathering VFS, once in the process, and returns its name.
func useGatherVFS() (string, error) {
	registerGatherVFS.Do(func() { theGatherVFS, gatherVFSErr = newGatherVFS() })
	return gatherVFSName, gatherVFSErr
}

func newGatherVFS() (*gatherVFS, error) {
	tls := libc.NewTLS()
	defer tls.Close()
	g := &gatherVFS{walTables: map[uintptr]uintptr{}, dbTables: map[uintptr]uintptr{}, unpatched: map[uintptr]uintptr{},
		wals: map[uintptr]*heldWrites{}, dbs: map[uintptr]string{}}
	if g.unix = sqlite3.Xsqlite3_vfs_find(tls, 0); g.unix == 0 {
		return nil, fmt.Errorf("SQLite has no default VFS")
	}
	name, err := libc.CString(gatherVFSName)
	if err != nil {
		return nil, err
	}
	vfs := libc.Xmalloc(tls, uint64(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
	if vfs == 0 {
		return nil, fmt.Errorf("out of memory")
	}
	v := (*sqlite3.Tsqlite3_vfs)(ptr(vfs))
	*v = *(*sqlite3.Tsqlite3_vfs)(ptr(g.unix))
	v.FpNext, v.FzName, v.FxOpen = 0, name, cfunc(gatherOpen)
	if rc := sqlite3.Xsqlite3_vfs_register(tls, vfs, 0); rc != sqlite3.SQLITE_OK {
		return nil, fmt.Errorf("registering SQLite VFS %s: error %d", gatherVFSName, rc)
	}
	return g, nil
}

// patched returns the copy of the unix method table unix that tables holds, making it
// with patch the first time.
func (g *gatherVFS) patched(tls *libc.TLS, tables map[uintptr]uintptr, unix uintptr, patch func(*sqlite3.Tsqlite3_io_methods)) (uintptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if table, ok := tables[unix]; ok {
		return table, nil
	}
	table := libc.Xmalloc(tls, uint64(unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{})))
	if table == 0 {
		return 0, fmt.Errorf("out of memory")
	}
	m := (*sqlite3.Tsqlite3_io_methods)(ptr(table))
	*m = *(*sqlite3.Tsqlite3_io_methods)(ptr(unix))
	patch(m)
	tables[unix], g.unpatched[table] = table, unix
	return table, nil
}

func patchWAL(m *sqlite3.Tsqlite3_io_methods) {
	m.FxClose = cfunc(walClose)
	m.FxRead = cfunc(walRead)
	m.FxWrite = cfunc(walWrite)
	m.FxTruncate = cfunc(walTruncate)
	m.FxSync = cfunc(walSync)
	m.FxFileSize = cfunc(walFileSize)
	m.FxFileControl = cfunc(walFileControl)
}

func patchDB(m *sqlite3.Tsqlite3_io_methods) {
	m.FxClose = cfunc(dbClose)
	m.FxShmLock = cfunc(dbShmLock)
}

// gatherOpen opens a file through the unix VFS, in place, and gives a WAL or a main
// database file its patched methods.
func gatherOpen(tls *libc.TLS, vfs, name, file uintptr, flags int32, outFlags uintptr) int32 {
	g := theGatherVFS
	open := (*sqlite3.Tsqlite3_vfs)(ptr(g.unix)).FxOpen
	rc := (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&open)))(tls, g.unix, name, file, flags, outFlags)
	if rc != sqlite3.SQLITE_OK || name == 0 || flags&(sqlite3.SQLITE_OPEN_WAL|sqlite3.SQLITE_OPEN_MAIN_DB) == 0 {
		return rc
	}
	f := (*sqlite3.Tsqlite3_file)(ptr(file))
	unix := f.FpMethods
	if flags&sqlite3.SQLITE_OPEN_MAIN_DB != 0 {
		table, err := g.patched(tls, g.dbTables, unix, patchDB)
		if err != nil {
			return g.refuse(tls, file, unix)
		}
		g.mu.Lock()
		g.dbs[file] = libc.GoString(name)
		g.mu.Unlock()
		f.FpMethods = table
		return sqlite3.SQLITE_OK
	}
	table, err := g.patched(tls, g.walTables, unix, patchWAL)
	mem := libc.Xmalloc(tls, walGatherMax)
	if err != nil || mem == 0 {
		libc.Xfree(tls, mem)
		return g.refuse(tls, file, unix)
	}
	g.mu.Lock()
	g.wals[file] = &heldWrites{path: libc.GoString(name), unix: unixMethods{(*sqlite3.Tsqlite3_io_methods)(ptr(unix))}, mem: mem}
	g.mu.Unlock()
	f.FpMethods = table
	return sqlite3.SQLITE_OK
}

// refuse closes a file the unix VFS opened and reports it could not be: SQLite does not
// close a file whose open failed.
func (g *gatherVFS) refuse(tls *libc.TLS, file, unix uintptr) int32 {
	unixMethods{(*sqlite3.Tsqlite3_io_methods)(ptr(unix))}.close(tls, file)
	(*sqlite3.Tsqlite3_file)(ptr(file)).FpMethods = 0
	return sqlite3.SQLITE_NOMEM
}

// unixOf returns the unix methods of a file opened through the gathering VFS.
func (g *gatherVFS) unixOf(file uintptr) unixMethods {
	g.mu.Lock()
	defer g.mu.Unlock()
	return unixMethods{(*sqlite3.Tsqlite3_io_methods)(ptr(g.unpatched[(*sqlite3.Tsqlite3_file)(ptr(file)).FpMethods]))}
}

func (g *gatherVFS) held(file uintptr) *heldWrites {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wals[file]
}

// flush writes what the WAL file holds, if anything, and holds nothing after, whether
// the write succeeded or not; it returns SQLite's result code.
func (g *gatherVFS) flush(tls *libc.TLS, file uintptr, h *heldWrites) int32 {
	if h.n == 0 {
		return sqlite3.SQLITE_OK
	}
	rc := h.unix.write(tls, file, h.mem, int32(h.n), h.start)
	h.n = 0
	return rc
}

// flushFirst writes what the WAL file holds and, if that worked, reports the unix
// method to run next.
func flushFirst(tls *libc.TLS, file uintptr) (unixMethods, int32) {
	g := theGatherVFS
	h := g.held(file)
	return h.unix, g.flush(tls, file, h)
}

func walWrite(tls *libc.TLS, file, buf uintptr, amount int32, offset int64) int32 {
	g := theGatherVFS
	h := g.held(file)
	if h.n > 0 && (offset != h.start+h.n || h.n+int64(amount) > walGatherMax) {
		if rc := g.flush(tls, file, h); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if int64(amount) > walGatherMax { // never from SQLite (a page is at most 64 KiB)
		return h.unix.write(tls, file, buf, amount, offset)
	}
	if h.n == 0 {
		h.start = offset
	}
	copy(unsafe.Slice((*byte)(ptr(h.mem+uintptr(h.n))), amount), unsafe.Slice((*byte)(ptr(buf)), amount))
	h.n += int64(amount)
	return sqlite3.SQLITE_OK
}

func walSync(tls *libc.TLS, file uintptr, flags int32) int32 {
	unix, rc := flushFirst(tls, file)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	sync := unix.FxSync
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&sync)))(tls, file, flags)
}

func walRead(tls *libc.TLS, file, buf uintptr, amount int32, offset int64) int32 {
	unix, rc := flushFirst(tls, file)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	read := unix.FxRead
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&read)))(tls, file, buf, amount, offset)
}

func walTruncate(tls *libc.TLS, file uintptr, size int64) int32 {
	unix, rc := flushFirst(tls, file)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	truncate := unix.FxTruncate
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&truncate)))(tls, file, size)
}

func walFileSize(tls *libc.TLS, file, size uintptr) int32 {
	unix, rc := flushFirst(tls, file)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	fileSize := unix.FxFileSize
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&fileSize)))(tls, file, size)
}

func walFileControl(tls *libc.TLS, file uintptr, op int32, arg uintptr) int32 {
	unix, rc := flushFirst(tls, file)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	control := unix.FxFileControl
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&control)))(tls, file, op, arg)
}

// walClose closes the WAL. Nothing is held by then (the write lock was released first),
// and if something were, it would belong to no commit: it is dropped.
func walClose(tls *libc.TLS, file uintptr) int32 {
	g := theGatherVFS
	g.mu.Lock()
	h := g.wals[file]
	delete(g.wals, file)
	g.mu.Unlock()
	libc.Xfree(tls, h.mem)
	return h.unix.close(tls, file)
}

// dbShmLock is the database file's xShmLock: before this connection's write lock on the
// WAL is released, its WAL's held writes go to the file. After a commit nothing is held
// (the commit's sync wrote them); after a rollback, the frames of pages SQLite spilled to
// the WAL during the transaction may be, and written later they could overwrite another
// writer's commit.
//
// Only the connection releasing the lock can hold writes for this path: a WAL is
// written only under the write lock. So the WALs picked here, under the lock of the
// maps, are its own, which no other goroutine closes meanwhile. (In locking_mode
// EXCLUSIVE SQLite releases no write lock here; the backend never sets it.)
func dbShmLock(tls *libc.TLS, file uintptr, offset, n, flags int32) int32 {
	g := theGatherVFS
	if flags == sqlite3.SQLITE_SHM_UNLOCK|sqlite3.SQLITE_SHM_EXCLUSIVE && offset <= sqlite3.WAL_WRITE_LOCK && sqlite3.WAL_WRITE_LOCK < offset+n {
		type wal struct {
			file uintptr
			held *heldWrites
		}
		var mine []wal
		g.mu.Lock()
		path := g.dbs[file] + "-wal"
		for w, h := range g.wals {
			if h.path == path && h.n > 0 {
				mine = append(mine, wal{w, h})
			}
		}
		g.mu.Unlock()
		for _, w := range mine {
			g.flush(tls, w.file, w.held) // a failure drops what was held: it was no commit's
		}
	}
	shmLock := g.unixOf(file).FxShmLock
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&shmLock)))(tls, file, offset, n, flags)
}

func dbClose(tls *libc.TLS, file uintptr) int32 {
	g := theGatherVFS
	unix := g.unixOf(file)
	g.mu.Lock()
	delete(g.dbs, file)
	g.mu.Unlock()
	return unix.close(tls, file)
}

// unixMethods are the unix VFS's methods of an open file.
type unixMethods struct{ *sqlite3.Tsqlite3_io_methods }

func (m unixMethods) write(tls *libc.TLS, file, buf uintptr, amount int32, offset int64) int32 {
	write := m.FxWrite
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&write)))(tls, file, buf, amount, offset)
}

func (m unixMethods) close(tls *libc.TLS, file uintptr) int32 {
	close := m.FxClose
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&close)))(tls, file)
}

// cfunc is f as the C code transpiled by modernc.org calls a function pointer: the
// address of the Go func value (as modernc's own __ccgo_fp makes it).
func cfunc(f any) uintptr { return (*[2]uintptr)(unsafe.Pointer(&f))[1] }

// ptr is an address in C memory (SQLite's and libc's allocations, never Go's heap) as
// a pointer.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
