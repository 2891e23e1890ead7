package evidence

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Bundle is a bundle as read and verified.
type Bundle struct {
	Dir      string
	Manifest Manifest
	Records  []Record
	// Heads[i] is the chain head after i records: Heads[0] is the manifest's hash.
	Heads []string
	Seal  *Seal // nil when unsealed
	// Profile is the recorded text of the profile that drove the app (v2; nil before).
	Profile []byte
	// Unrecorded are frame and OCR files of an unsealed bundle that no record refers
	// to: a frame is written before the record that names it, so a process killed
	// between the two leaves one behind (perhaps cut short). They carry no claim; a
	// sealed bundle may have none.
	Unrecorded []string
}

// Head is the chain head after every record.
func (b *Bundle) Head() string { return b.Heads[len(b.Heads)-1] }

// Sealed reports whether the bundle was sealed.
func (b *Bundle) Sealed() bool { return b.Seal != nil }

// HasHead reports whether h was the chain head at some moment of this bundle.
func (b *Bundle) HasHead(h string) bool {
	for _, x := range b.Heads {
		if x == h {
			return true
		}
	}
	return false
}

// VerifyOptions are Verify's optional checks.
type VerifyOptions struct {
	// PublicKey, when set, requires the seal to be signed by this key.
	PublicKey ed25519.PublicKey
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Verify reads a bundle directory and recomputes everything: the manifest's format,
// every line's sequence number and chain link, every frame's and OCR file's hash, no
// missing or extra file, and, when sealed, the seal's chain head, file hashes and
// signature. It fails with the first problem named.
func Verify(dir string, opt VerifyOptions) (*Bundle, error) {
	b := &Bundle{Dir: dir}
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		return nil, invalid("%s is %s, not a bundle folder (name the folder itself)", dir, describeMode(fi.Mode()))
	}
	mb, err := readRegular(filepath.Join(dir, "manifest.json"), maxManifestBytes)
	if err != nil {
		return nil, invalid("manifest.json: %v", err)
	}
	if err := strictJSON(mb, &b.Manifest); err != nil {
		return nil, invalid("manifest.json is unreadable: %v", err)
	}
	if !knownFormat(b.Manifest.Format) {
		return nil, invalid("manifest.json has format %q; this sendonce reads %s", b.Manifest.Format, strings.Join(Formats, " and "))
	}
	b.Heads = []string{sum(mb)}
	referenced := map[string]bool{"manifest.json": true, "steps.jsonl": true}
	if p := b.Manifest.Profile; p != nil {
		if b.Manifest.Format == FormatV1 {
			return nil, invalid("a %s manifest names a profile: no such bundle was ever written", FormatV1)
		}
		pb, err := readRegular(filepath.Join(dir, "profile.json"), maxManifestBytes)
		if err != nil {
			return nil, invalid("profile.json: %v", err)
		}
		if sum(pb) != p.SHA256 {
			return nil, invalid("profile.json was edited: it is not the profile the manifest names")
		}
		b.Profile, referenced["profile.json"] = pb, true
	}

	sb, err := readRegular(filepath.Join(dir, "steps.jsonl"), maxStepsBytes)
	if err != nil {
		return nil, invalid("steps.jsonl: %v", err)
	}
	if len(sb) > 0 && sb[len(sb)-1] != '\n' {
		return nil, invalid("steps.jsonl is truncated: its last line is incomplete")
	}
	lines := bytes.Split(bytes.TrimSuffix(sb, []byte("\n")), []byte("\n"))
	if len(sb) == 0 {
		lines = nil
	}
	recs := make([]Record, len(lines))
	for i, line := range lines {
		if err := strictJSON(line, &recs[i]); err != nil {
			return nil, invalid("steps.jsonl line %d is unreadable: %v", i+1, err)
		}
	}
	if err := checkSequence(recs); err != nil {
		return nil, err
	}
	for i, rec := range recs {
		n := i + 1
		switch {
		case rec.Prev != b.Heads[i]:
			return nil, invalid("record %d does not chain to the one before it: it or an earlier line was edited", n)
		case !knownKind(rec.Kind):
			return nil, invalid("record %d has unknown kind %q", n, rec.Kind)
		case rec.Kind == KindStep && !knownClass(rec.Class):
			return nil, invalid("record %d has unknown boundary class %q", n, rec.Class)
		}
		for _, f := range framesOf(rec) {
			referenced["frames/"+f+".png"] = true
		}
		if rec.OCRRef != "" {
			referenced["ocr/"+rec.OCRRef+".json"] = true
		}
		b.Records = append(b.Records, rec)
		b.Heads = append(b.Heads, sum(lines[i]))
	}

	// A sealed bundle is checked against its seal first: it names what changed after
	// sealing more precisely than the file checks can.
	if err := b.checkSeal(opt); err != nil {
		return nil, err
	}
	if b.Unrecorded, err = checkFiles(dir, referenced, !b.Sealed()); err != nil {
		return nil, err
	}
	return b, nil
}

// checkSequence names the first line whose sequence number is wrong, and how.
func checkSequence(recs []Record) error {
	seen := map[int]bool{}
	at := map[int]bool{}
	for _, r := range recs {
		at[r.Seq] = true
	}
	for i, r := range recs {
		n := i + 1
		switch {
		case r.Seq == n:
		case seen[r.Seq]:
			return invalid("steps.jsonl line %d repeats record %d: a record was duplicated", n, r.Seq)
		case at[n]:
			return invalid("steps.jsonl line %d holds record %d, expected %d, which comes later: records were reordered", n, r.Seq, n)
		default:
			return invalid("steps.jsonl line %d holds record %d, expected %d: record %d was deleted", n, r.Seq, n, n)
		}
		seen[r.Seq] = true
	}
	return nil
}
func framesOf(r Record) []string {
	var out []string
	for _, f := range []string{r.Before, r.After} {
		if f != "" {
			out = append(out, f)
		}
	}
	for _, o := range r.OCR {
		if o.Frame != "" {
			out = append(out, o.Frame)
		}
	}
	return out
}

// checkFiles finds missing, edited and extra files.
// checkFiles checks that the bundle holds exactly the files its records refer to, each
// with the hash it is named by. With unsealed, frame and OCR files no record refers to
// are returned instead (see Bundle.Unrecorded).
func checkFiles(dir string, referenced map[string]bool, unsealed bool) (unrecorded []string, _ error) {
	present := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." || rel == "frames" || rel == "ocr" {
				return nil
			}
			return invalid("extra folder %s", rel)
		}
		if !d.Type().IsRegular() {
			return invalid("%s is not a regular file", rel)
		}
		if rel == "seal.json" {
			return nil
		}
		if !referenced[rel] {
			if unsealed && (strings.HasPrefix(rel, "frames/") || strings.HasPrefix(rel, "ocr/")) {
				unrecorded = append(unrecorded, rel)
				return nil
			}
			return invalid("extra file %s: no record refers to it", rel)
		}
		present[rel] = true
		if strings.HasPrefix(rel, "frames/") || strings.HasPrefix(rel, "ocr/") {
			content, err := readRegular(path, maxFrameBytes)
			if err != nil {
				return invalid("%s: %v", rel, err)
			}
			name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(rel), ".png"), ".json")
			if sum(content) != name {
				return invalid("%s was edited: its content no longer has the hash it is named by", rel)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var missing []string
	for rel := range referenced {
		if !present[rel] {
			missing = append(missing, rel)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, invalid("missing file %s", missing[0])
	}
	sort.Strings(unrecorded)
	return unrecorded, nil
}

func (b *Bundle) checkSeal(opt VerifyOptions) error {
	sb, err := readRegular(filepath.Join(b.Dir, "seal.json"), maxSealBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if opt.PublicKey != nil {
			return invalid("the bundle is not sealed, so it carries no signature")
		}
		return nil
	}
	if err != nil {
		return invalid("seal.json: %v", err)
	}
	var s Seal
	if err := strictJSON(sb, &s); err != nil {
		return invalid("seal.json is unreadable: %v", err)
	}
	if s.Format != b.Manifest.Format {
		return invalid("seal.json has format %q, the manifest %q", s.Format, b.Manifest.Format)
	}
	if s.KeyID != "" && s.KeyID != b.Manifest.Workstation {
		return invalid("the seal names key %q, the manifest workstation %q", s.KeyID, b.Manifest.Workstation)
	}
	if s.ChainHead != b.Head() || s.Records != len(b.Records) {
		return invalid("the seal names chain head %.12s… after %d records, but the steps end at %.12s… after %d: records were changed, dropped or added after sealing", s.ChainHead, s.Records, b.Head(), len(b.Records))
	}
	files, err := hashFiles(b.Dir)
	if err != nil {
		return err
	}
	for _, rel := range sortedNames(s.Files) {
		got, ok := files[rel]
		switch {
		case !ok:
			return invalid("missing file %s (the seal lists it)", rel)
		case got != s.Files[rel]:
			return invalid("%s was edited after sealing", rel)
		}
	}
	for _, rel := range sortedNames(files) {
		if _, ok := s.Files[rel]; !ok {
			return invalid("extra file %s: added after sealing", rel)
		}
	}
	if s.Signature != "" || opt.PublicKey != nil {
		pub, err := base64.StdEncoding.DecodeString(s.PublicKey)
		sig, err2 := base64.StdEncoding.DecodeString(s.Signature)
		switch {
		case s.Signature == "":
			return invalid("the seal is not signed")
		case err != nil || err2 != nil || len(pub) != ed25519.PublicKeySize:
			return invalid("the seal's signature or public key is unreadable")
		case opt.PublicKey != nil && !bytes.Equal(pub, opt.PublicKey):
			return invalid("the seal is signed by another key than the one given")
		case !ed25519.Verify(pub, s.SignedBytes(), sig):
			return invalid("wrong signature: the seal does not verify with its key")
		}
	}
	b.Seal = &s
	return nil
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
