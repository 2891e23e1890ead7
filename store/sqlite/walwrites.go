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
// frames: 33 writes, and on some machines a write into the page cache costs 3-5 µs,
// as much again as the sync (BENCHMARKS.md, issue 15). walVFS is SQLite's own unix VFS
// with one change: the writes to a WAL are gathered in memory, in order, and handed to
// the file as one write just before the WAL is synced, read, sized, truncated or
// closed. The sync that makes a commit durable still follows every byte of it.
//
// That is safe only where every commit syncs the WAL: SQLite makes a commit's frames
// visible to other connections (in the WAL index) right after writing them, and syncs
// them first only under synchronous FULL or EXTRA. Under NORMAL or OFF a reader could
// be shown frames still in this process's memory, so open uses walVFS only with FULL.
//
// A crash loses what was gathered and not written: frames of a commit that had not
// synced, which no one was told of, as if the crash had come before the writes.

// walVFSName is the name the gathering VFS is registered under.
const walVFSName = "sendonce-unix-wal"

// walFileHeader is the room a WAL file's sqlite3_file needs before the unix VFS's own
// file: its methods pointer, rounded up to 16 bytes.
const walFileHeader = 16

// walGatherMax is the most a WAL's gathered writes hold before they are written out: a
// claim's commit is about 17 KiB, and the unix VFS writes at most 128 KiB - 1 in one
// call (more would be taken for a full disk).
const walGatherMax = 64 << 10

var (
	registerWALVFS sync.Once
	walVFSErr      error
	// unixVFS is SQLite's unix VFS, which walVFS delegates to; walMethods are the
	// methods of a WAL opened through walVFS. Both live in C memory, set up once.
	unixVFS    uintptr
	walMethods uintptr

	// gathered holds each open WAL's pending writes, by the address of its sqlite3_file.
	gatheredMu sync.Mutex
	gathered   = map[uintptr]*gather{}
)

// gather is one WAL's writes not yet handed to the file: n bytes at mem, to go at
// offset start.
type gather struct {
	mem   uintptr // walGatherMax bytes of C memory
	start int64
	n     int64
}

// useWALVFS registers walVFS, once in the process, and returns its name. SQLite's
// registry of VFSs is process-wide: this is the one thing the package sets up there.
func useWALVFS() (string, error) {
	registerWALVFS.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		unixVFS = sqlite3.Xsqlite3_vfs_find(tls, 0)
		if unixVFS == 0 {
			walVFSErr = fmt.Errorf("SQLite has no default VFS")
			return
		}
		unix := (*sqlite3.Tsqlite3_vfs)(ptr(unixVFS))
		name, err := libc.CString(walVFSName)
		if err != nil {
			walVFSErr = err
			return
		}
		vfs := libc.Xmalloc(tls, uint64(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
		methods := libc.Xcalloc(tls, 1, uint64(unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{})))
		if vfs == 0 || methods == 0 {
			walVFSErr = fmt.Errorf("out of memory")
			return
		}
		v := (*sqlite3.Tsqlite3_vfs)(ptr(vfs))
		*v = *unix
		v.FpNext = 0
		v.FzName = name
		v.FszOsFile = unix.FszOsFile + walFileHeader
		v.FxOpen = cfunc(walOpen)
		m := (*sqlite3.Tsqlite3_io_methods)(ptr(methods))
		m.FiVersion = 1 // a WAL has no locks, shared memory or mapping of its own
		m.FxClose = cfunc(walClose)
		m.FxRead = cfunc(walRead)
		m.FxWrite = cfunc(walWrite)
		m.FxTruncate = cfunc(walTruncate)
		m.FxSync = cfunc(walSync)
		m.FxFileSize = cfunc(walFileSize)
		m.FxLock = cfunc(walNoLock)
		m.FxUnlock = cfunc(walNoLock)
		m.FxCheckReservedLock = cfunc(walCheckReservedLock)
		m.FxFileControl = cfunc(walFileControl)
		m.FxSectorSize = cfunc(walSectorSize)
		m.FxDeviceCharacteristics = cfunc(walDeviceCharacteristics)
		walMethods = methods
		if rc := sqlite3.Xsqlite3_vfs_register(tls, vfs, 0); rc != sqlite3.SQLITE_OK {
			walVFSErr = fmt.Errorf("registering SQLite VFS %s: error %d", walVFSName, rc)
		}
	})
	return walVFSName, walVFSErr
}

// walOpen opens a file through the unix VFS: a WAL behind walMethods, with the unix
// file after walFileHeader; any other file as the unix VFS opens it, in place.
func walOpen(tls *libc.TLS, vfs, name, file uintptr, flags int32, outFlags uintptr) int32 {
	open := (*sqlite3.Tsqlite3_vfs)(ptr(unixVFS)).FxOpen
	if flags&sqlite3.SQLITE_OPEN_WAL == 0 {
		return (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&open)))(tls, unixVFS, name, file, flags, outFlags)
	}
	(*sqlite3.Tsqlite3_file)(ptr(file)).FpMethods = 0
	inner := file + walFileHeader
	rc := (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&open)))(tls, unixVFS, name, inner, flags, outFlags)
	if rc != sqlite3.SQLITE_OK {
		if (*sqlite3.Tsqlite3_file)(ptr(inner)).FpMethods != 0 {
			innerMethods(file).close(tls, inner)
		}
		return rc
	}
	mem := libc.Xmalloc(tls, walGatherMax)
	if mem == 0 {
		innerMethods(file).close(tls, inner)
		return sqlite3.SQLITE_NOMEM
	}
	gatheredMu.Lock()
	gathered[file] = &gather{mem: mem}
	gatheredMu.Unlock()
	(*sqlite3.Tsqlite3_file)(ptr(file)).FpMethods = walMethods
	return sqlite3.SQLITE_OK
}

func pending(file uintptr) *gather {
	gatheredMu.Lock()
	defer gatheredMu.Unlock()
	return gathered[file]
}

// flush writes what file has gathered, if anything; it returns SQLite's result code.
func flush(tls *libc.TLS, file uintptr) int32 {
	g := pending(file)
	if g.n == 0 {
		return sqlite3.SQLITE_OK
	}
	rc := innerMethods(file).write(tls, file+walFileHeader, g.mem, int32(g.n), g.start)
	g.n = 0
	return rc
}

func walWrite(tls *libc.TLS, file, buf uintptr, amount int32, offset int64) int32 {
	g := pending(file)
	if g.n > 0 && (offset != g.start+g.n || g.n+int64(amount) > walGatherMax) {
		if rc := flush(tls, file); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if int64(amount) > walGatherMax {
		return innerMethods(file).write(tls, file+walFileHeader, buf, amount, offset)
	}
	if g.n == 0 {
		g.start = offset
	}
	copy(unsafe.Slice((*byte)(ptr(g.mem+uintptr(g.n))), amount), unsafe.Slice((*byte)(ptr(buf)), amount))
	g.n += int64(amount)
	return sqlite3.SQLITE_OK
}

func walSync(tls *libc.TLS, file uintptr, flags int32) int32 {
	if rc := flush(tls, file); rc != sqlite3.SQLITE_OK {
		return rc
	}
	sync := innerMethods(file).FxSync
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&sync)))(tls, file+walFileHeader, flags)
}

func walRead(tls *libc.TLS, file, buf uintptr, amount int32, offset int64) int32 {
	if rc := flush(tls, file); rc != sqlite3.SQLITE_OK {
		return rc
	}
	read := innerMethods(file).FxRead
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&read)))(tls, file+walFileHeader, buf, amount, offset)
}

func walTruncate(tls *libc.TLS, file uintptr, size int64) int32 {
	if rc := flush(tls, file); rc != sqlite3.SQLITE_OK {
		return rc
	}
	truncate := innerMethods(file).FxTruncate
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&truncate)))(tls, file+walFileHeader, size)
}

func walFileSize(tls *libc.TLS, file, size uintptr) int32 {
	if rc := flush(tls, file); rc != sqlite3.SQLITE_OK {
		return rc
	}
	fileSize := innerMethods(file).FxFileSize
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&fileSize)))(tls, file+walFileHeader, size)
}

func walFileControl(tls *libc.TLS, file uintptr, op int32, arg uintptr) int32 {
	if rc := flush(tls, file); rc != sqlite3.SQLITE_OK {
		return rc
	}
	control := innerMethods(file).FxFileControl
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&control)))(tls, file+walFileHeader, op, arg)
}

func walSectorSize(tls *libc.TLS, file uintptr) int32 {
	sectorSize := innerMethods(file).FxSectorSize
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&sectorSize)))(tls, file+walFileHeader)
}

func walDeviceCharacteristics(tls *libc.TLS, file uintptr) int32 {
	characteristics := innerMethods(file).FxDeviceCharacteristics
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&characteristics)))(tls, file+walFileHeader)
}

// A WAL is never locked through its file: SQLite locks the database and its shared memory.
func walNoLock(tls *libc.TLS, file uintptr, lock int32) int32 { return sqlite3.SQLITE_OK }

func walCheckReservedLock(tls *libc.TLS, file, out uintptr) int32 {
	*(*int32)(ptr(out)) = 0
	return sqlite3.SQLITE_OK
}

// walClose writes what was gathered and closes the file; a failed write is reported,
// and the file closed all the same.
func walClose(tls *libc.TLS, file uintptr) int32 {
	rc := flush(tls, file)
	gatheredMu.Lock()
	g := gathered[file]
	delete(gathered, file)
	gatheredMu.Unlock()
	libc.Xfree(tls, g.mem)
	if closed := innerMethods(file).close(tls, file+walFileHeader); rc == sqlite3.SQLITE_OK {
		rc = closed
	}
	return rc
}

// unixMethods are the unix VFS's methods of an open file.
type unixMethods struct{ *sqlite3.Tsqlite3_io_methods }

func innerMethods(file uintptr) unixMethods {
	return unixMethods{(*sqlite3.Tsqlite3_io_methods)(ptr((*sqlite3.Tsqlite3_file)(ptr(file + walFileHeader)).FpMethods))}
}

func (m unixMethods) write(tls *libc.TLS, file, buf uintptr, amount int32, offset int64) int32 {
	write := m.FxWrite
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&write)))(tls, file, buf, amount, offset)
}

func (m unixMethods) close(tls *libc.TLS, file uintptr) int32 {
	close := m.FxClose
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&close)))(tls, file)
}

// cfunc is f as the C code transpiled by modernc.org calls a function pointer: the
// address of the Go func value.
func cfunc(f any) uintptr { return (*[2]uintptr)(unsafe.Pointer(&f))[1] }

// ptr is an address in C memory (SQLite's and libc's allocations, never Go's heap) as
// a pointer.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
