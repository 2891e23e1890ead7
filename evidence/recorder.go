package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sendonce/sendonce/internal/clock"
	"github.com/sendonce/sendonce/internal/files"
	"image"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Clock gives the wall time and a monotonic reading; tests inject a fixed one.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return clock.System() }

// SystemClock is the real clock.
func SystemClock() Clock { return systemClock{} }

// Recorder appends records to one bundle. Its methods may be called from several
// goroutines (a delivery's provider lookup appends beside the screen's reads): each
// Append is one whole record, chained in the order the calls took the lock.
type Recorder struct {
	mu     sync.Mutex
	dir    string
	steps  *os.File
	clock  Clock
	start  time.Time
	seq    int
	head   string
	sealed bool
	// format and workstation are the manifest's: the seal repeats them.
	format, workstation string
	// pixels maps the hash of a frame's raw pixels to its stored PNG's hash, so a frame
	// seen before is not encoded again.
	pixels map[[32]byte]string
	// last is a copy of the last RGBA frame stored or looked up: a frame equal to it
	// (the next step's before-frame is often the last one's after-frame) is not hashed.
	last lastFrame
}

type lastFrame struct {
	rect   image.Rectangle
	stride int
	pix    []byte
	hash   string
}

// is: img's pixels are the last frame's.
func (l *lastFrame) is(img *image.RGBA) bool {
	return l.hash != "" && l.rect == img.Rect && l.stride == img.Stride && bytes.Equal(l.pix, img.Pix)
}

func (l *lastFrame) set(img *image.RGBA, hash string) {
	l.rect, l.stride, l.pix, l.hash = img.Rect, img.Stride, append(l.pix[:0], img.Pix...), hash
}

const (
	dirMode  = 0o700
	fileMode = 0o600
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Create starts a bundle in dir, which must not exist yet, and writes the manifest.
func Create(dir string, m Manifest, clock Clock) (*Recorder, error) {
	if clock == nil {
		clock = SystemClock()
	}
	if m.Format == "" {
		m.Format = Format
	}
	if !knownFormat(m.Format) {
		return nil, fmt.Errorf("evidence bundle: unknown format %q", m.Format)
	}
	if m.StartedAt.IsZero() {
		m.StartedAt = clock.Now().UTC()
	}
	if m.Profile != nil {
		if m.Format == FormatV1 {
			return nil, fmt.Errorf("evidence bundle: a %s bundle cannot record its profile", FormatV1)
		}
		p := *m.Profile
		p.SHA256 = sum(p.Text)
		m.Profile = &p
	}
	if err := os.MkdirAll(filepath.Dir(dir), dirMode); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("evidence bundle: %s: %w", dir, fs.ErrExist)
	}
	// The bundle is made whole in a hidden folder beside it and then renamed into place,
	// so that a process killed while making it leaves no bundle without its manifest
	// (a ".NAME.creating-*" folder is left instead, and no bundle).
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".creating-")
	if err != nil {
		return nil, fmt.Errorf("evidence bundle: %w", err)
	}
	f, mb, err := startBundle(tmp, m)
	if err == nil {
		if err = files.RenameNoReplace(tmp, dir); err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("evidence bundle: %w", err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		f.Close()
		return nil, err
	}
	return &Recorder{dir: dir, steps: f, clock: clock, start: clock.Now(), head: sum(mb), pixels: map[[32]byte]string{},
		format: m.Format, workstation: m.Workstation}, nil
}

// startBundle writes a bundle's folders, profile and manifest in dir and opens its
// steps file, all made durable; it returns the steps file and the manifest's bytes.
func startBundle(dir string, m Manifest) (*os.File, []byte, error) {
	if err := os.Chmod(dir, dirMode); err != nil {
		return nil, nil, err
	}
	for _, sub := range []string{"frames", "ocr"} {
		if err := os.Mkdir(filepath.Join(dir, sub), dirMode); err != nil {
			return nil, nil, err
		}
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	mb = append(mb, '\n')
	if m.Profile != nil {
		if err := writeDurable(filepath.Join(dir, "profile.json"), m.Profile.Text); err != nil {
			return nil, nil, err
		}
	}
	if err := writeDurable(filepath.Join(dir, "manifest.json"), mb); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "steps.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, fileMode)
	if err != nil {
		return nil, nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, mb, nil
}

// Dir is the bundle's directory.
func (r *Recorder) Dir() string { return r.dir }

// Head is the chain head: the SHA-256 of the last line written (of the manifest before
// any line).
func (r *Recorder) Head() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.head
}

// Seq is the sequence number of the last record written (0 before any).
func (r *Recorder) Seq() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// FramePNG stores an encoded PNG by its SHA-256 (once) and returns the hash.
func (r *Recorder) FramePNG(b []byte) (string, error) {
	h := sum(b)
	return h, writeOnce(filepath.Join(r.dir, "frames", h+".png"), b)
}

// Frame encodes an image as PNG and stores it. A frame whose pixels were stored before
// is not encoded again; one equal to the last frame is not even hashed.
func (r *Recorder) Frame(img image.Image) (string, error) {
	var key [32]byte
	rgba, isRGBA := img.(*image.RGBA)
	if isRGBA {
		r.mu.Lock()
		same, last := r.last.is(rgba), r.last.hash
		r.mu.Unlock()
		if same {
			return last, nil
		}
		h := sha256.New()
		fmt.Fprintf(h, "%v %d|", rgba.Rect, rgba.Stride)
		h.Write(rgba.Pix)
		copy(key[:], h.Sum(nil))
		r.mu.Lock()
		known, ok := r.pixels[key]
		if ok {
			r.last.set(rgba, known)
		}
		r.mu.Unlock()
		if ok {
			return known, nil
		}
	}
	var buf bytes.Buffer
	if err := encodePNG(&buf, img); err != nil {
		return "", err
	}
	h, err := r.FramePNG(buf.Bytes())
	if err == nil && isRGBA {
		r.mu.Lock()
		r.pixels[key] = h
		r.last.set(rgba, h)
		r.mu.Unlock()
	}
	return h, err
}

// LargeOCRBytes is the size above which a record's OCR moves to ocr/<sha>.json.
const LargeOCRBytes = 16 << 10

// Append writes a record, flushed to disk before it returns, and returns the new chain
// head. Seq, Prev, Wall and Mono are filled in.
func (r *Recorder) Append(rec Record) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return "", errors.New("evidence bundle is sealed")
	}
	if !knownKind(rec.Kind) {
		return "", fmt.Errorf("unknown record kind %q", rec.Kind)
	}
	if rec.Kind == KindStep && !knownClass(rec.Class) {
		return "", fmt.Errorf("step %q has no boundary class (safe, may_submit, submit)", rec.Intent)
	}
	if len(rec.OCR) > 0 {
		ob, err := json.Marshal(rec.OCR)
		if err != nil {
			return "", err
		}
		if len(ob) > LargeOCRBytes {
			h := sum(ob)
			if err := writeOnce(filepath.Join(r.dir, "ocr", h+".json"), ob); err != nil {
				return "", err
			}
			rec.OCR, rec.OCRRef = nil, h
		}
	}
	now := r.clock.Now()
	rec.Seq, rec.Prev, rec.Wall, rec.Mono = r.seq+1, r.head, now.UTC(), int64(now.Sub(r.start))
	line, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	if _, err := r.steps.Write(append(line, '\n')); err != nil {
		return "", err
	}
	if err := r.steps.Sync(); err != nil {
		return "", err
	}
	r.seq, r.head = rec.Seq, sum(line)
	return r.head, nil
}

// Seal is the last file of a bundle: what the attempt ended as, and the hash of every
// other file, so that any change to the bundle after sealing is detected.
type Seal struct {
	Format    string            `json:"format"`
	Outcome   string            `json:"outcome"`
	Reasons   []string          `json:"reasons,omitempty"`
	ChainHead string            `json:"chain_head"`
	Records   int               `json:"records"`
	Files     map[string]string `json:"files"` // relative path -> SHA-256
	SealedAt  time.Time         `json:"sealed_at"`
	// KeyID is the workstation whose key signed the seal (v2): the store holds its
	// registered public key.
	KeyID     string `json:"key_id,omitempty"`
	PublicKey string `json:"public_key,omitempty"` // base64 ed25519, when signed
	Signature string `json:"signature,omitempty"`  // base64 ed25519 over SignedBytes
}

// SignedBytes is what a seal's signature covers: the seal without its signature.
func (s Seal) SignedBytes() []byte {
	s.Signature = ""
	b, _ := json.Marshal(s)
	return b
}

// Seal closes the bundle with an outcome and its reasons, signed with sign when given
// (deliveries always sign, with their workstation's key). The signature covers the
// whole seal: the outcome, the chain head, every file's hash and the key id.
func (r *Recorder) Seal(outcome string, reasons []string, sign ed25519.PrivateKey) (Seal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return Seal{}, errors.New("evidence bundle is already sealed")
	}
	if err := r.steps.Close(); err != nil {
		return Seal{}, err
	}
	files, err := hashFiles(r.dir)
	if err != nil {
		return Seal{}, err
	}
	s := Seal{Format: r.format, Outcome: outcome, Reasons: reasons, ChainHead: r.head, Records: r.seq, Files: files, SealedAt: r.clock.Now().UTC()}
	if sign != nil {
		s.KeyID = r.workstation
		s.PublicKey = b64(sign.Public().(ed25519.PublicKey))
		s.Signature = b64(ed25519.Sign(sign, s.SignedBytes()))
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return Seal{}, err
	}
	if err := writeWhole(filepath.Join(r.dir, "seal.json"), append(b, '\n')); err != nil {
		return Seal{}, err
	}
	r.sealed = true // in place: whatever the folder's sync says, a second seal is wrong
	return s, syncDir(r.dir)
}

// writeWhole places a new file so that a crash leaves it whole or absent: it is written
// and synced as a hidden ".NAME.seal-*" file beside the bundle (outside it, so a
// leftover is never one of the bundle's files), then linked into place, which refuses
// an existing file on every file system (a rename would replace one where the system
// cannot refuse, NFS among them), and the hidden name removed. A seal cut short would
// make a bundle that no one can verify; an absent one leaves it unsealed, as any crash
// before sealing does. The caller syncs the bundle's folder.
func writeWhole(path string, b []byte) error {
	bundle := filepath.Dir(path)
	f, err := os.CreateTemp(filepath.Dir(bundle), "."+filepath.Base(bundle)+".seal-") // mode 0600, as fileMode
	if err != nil {
		return err
	}
	if err := fill(f, b); err != nil {
		return err
	}
	defer os.Remove(f.Name())
	return os.Link(f.Name(), path)
}

// Close closes the steps file without sealing, as a crash would leave it.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return nil
	}
	r.sealed = true
	return r.steps.Close()
}

// hashFiles hashes every regular file of a bundle except seal.json.
func hashFiles(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%w: %s is not a regular file", ErrInvalid, rel)
		case rel == "seal.json":
			return nil
		}
		b, err := readRegular(path, maxFileBytes(rel))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, rel, err)
		}
		files[rel] = sum(b)
		return nil
	})
	return files, err
}

func writeOnce(path string, b []byte) error {
	if _, err := os.Stat(path); err == nil {
		return nil // stored already: frames and OCR are content-addressed
	}
	return writeDurable(path, b)
}

// writeDurable writes a new file and fsyncs it and its folder.
func writeDurable(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	if err := fill(f, b); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// fill writes b to the new file f, syncs and closes it. A file it could not write
// whole (a full disk) is removed: frames are stored once by their hash, and a later
// writeOnce would take a file cut short for the frame.
func fill(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Reopen continues an unsealed bundle (to seal it after the process that wrote it
// closed it). It verifies the bundle first.
func Reopen(dir string, clock Clock) (*Recorder, error) {
	b, err := Verify(dir, VerifyOptions{})
	if err != nil {
		return nil, err
	}
	if b.Sealed() {
		return nil, errors.New("evidence bundle is already sealed")
	}
	if clock == nil {
		clock = SystemClock()
	}
	f, err := os.OpenFile(filepath.Join(dir, "steps.jsonl"), os.O_WRONLY|os.O_APPEND, fileMode)
	if err != nil {
		return nil, err
	}
	return &Recorder{dir: dir, steps: f, clock: clock, start: b.Manifest.StartedAt, seq: len(b.Records), head: b.Head(), pixels: map[[32]byte]string{},
		format: b.Manifest.Format, workstation: b.Manifest.Workstation}, nil
}
