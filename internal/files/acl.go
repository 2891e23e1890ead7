package files

import (
	"fmt"
	"strconv"
	"strings"
)

// The Windows side of the rules, written over a security descriptor's SDDL text (what
// Windows itself prints for it) so that it needs no unsafe pointer into an ACL, and is
// tested on every OS.

// Access rights that let a holder change a file or folder, or what is in a folder.
const (
	fileAddFile        = 0x2 // FILE_WRITE_DATA on a file
	fileAddSubdir      = 0x4 // FILE_APPEND_DATA on a file
	fileWriteEA        = 0x10
	fileDeleteChild    = 0x40
	fileWriteAttribute = 0x100
	rightDelete        = 0x10000
	rightWriteDAC      = 0x40000
	rightWriteOwner    = 0x80000
	genericAll         = 0x10000000
	genericWrite       = 0x40000000

	// changes is every right that changes the object itself or its entries.
	changes = fileAddFile | fileAddSubdir | fileWriteEA | fileDeleteChild | fileWriteAttribute | rightDelete | rightWriteDAC | rightWriteOwner | genericAll | genericWrite
	// replaces is what lets a holder remove, rename or take over what is in an ancestor
	// folder: like a sticky-bit folder on Unix, one where others may only add entries is
	// safe above a private folder.
	replaces = fileDeleteChild | rightDelete | rightWriteDAC | rightWriteOwner | genericAll
)

// sddlRights are SDDL's right abbreviations for files and folders.
var sddlRights = map[string]uint32{
	"GA": genericAll, "GW": genericWrite, "GR": 0x80000000, "GX": 0x20000000,
	"FA": 0x1F01FF, "FW": 0x120116, "FR": 0x120089, "FX": 0x1200A0,
	"SD": rightDelete, "WD": rightWriteDAC, "WO": rightWriteOwner, "RC": 0x20000,
	"CC": 0x1, "DC": 0x2, "LC": 0x4, "SW": 0x8, "RP": 0x10, "WP": 0x20, "DT": 0x40, "LO": 0x80, "CR": 0x100,
}

// Well-known accounts that may own and change what is above a private folder (and, the
// first two, the folder itself): a Windows machine's own administrators.
const (
	sidSystem         = "S-1-5-18"
	sidAdministrators = "S-1-5-32-544"
	sidTrustedInstall = "S-1-5-80-956008885-3425701886-2239341545-2356924512-1741879541"
)

// sddlAccounts are SDDL's abbreviations for the accounts above.
var sddlAccounts = map[string]string{"SY": sidSystem, "BA": sidAdministrators}

// checkSDDL applies the rule to one security descriptor: the owner is me (or, for an
// ancestor, the system, the administrators or TrustedInstaller), and no access-allowed
// entry that applies to the object gives anyone else a right that changes it (for an
// ancestor: that removes, renames or takes over its entries). The system and the
// administrators may change anything: they could anyway.
// same compares two accounts (a SID string or an SDDL abbreviation each).
func checkSDDL(path, sddl, me string, ancestor bool, same func(a, b string) bool) error {
	forbidden := uint32(changes)
	if ancestor {
		forbidden = replaces
	}
	return checkSDDLRights(path, sddl, me, ancestor, forbidden, same)
}

// Rights that let a holder read a file's data.
const (
	fileReadData = 0x1
	genericRead  = 0x80000000
	// reads is every right that reads a secret's bytes.
	reads = fileReadData | genericRead | genericAll
)

// checkSecretSDDL is the rule for a file that holds a secret: owned by me, and no
// access-allowed entry gives anyone else (the system and the administrators aside) a
// right that reads or changes it.
func checkSecretSDDL(path, sddl, me string, same func(a, b string) bool) error {
	return checkSDDLRights(path, sddl, me, false, changes|reads, same)
}

func checkSDDLRights(path, sddl, me string, ancestor bool, forbidden uint32, same func(a, b string) bool) error {
	owner, dacl, err := parseSDDL(sddl)
	if err != nil {
		return fmt.Errorf("%w: %s: cannot read its owner and access list: %v", ErrUnsafe, path, err)
	}
	machine := func(sid string) bool { return same(sid, sidSystem) || same(sid, sidAdministrators) }
	if !same(owner, me) && !(ancestor && (machine(owner) || same(owner, sidTrustedInstall))) {
		return fmt.Errorf("%w: %s is owned by %s, not by this user (%s)", ErrUnsafe, path, owner, me)
	}
	if dacl == nil {
		return fmt.Errorf("%w: %s has no access list: everyone may change it", ErrUnsafe, path)
	}
	for _, e := range dacl {
		if e.allow && !e.inheritOnly && e.rights&forbidden != 0 && !same(e.sid, me) && !machine(e.sid) && !(ancestor && same(e.sid, sidTrustedInstall)) {
			if e.rights&forbidden&^uint32(changes|replaces) != 0 {
				return fmt.Errorf("%w: %s lets %s read it (rights %#x): a secret must be yours alone; remove that entry (icacls %s /inheritance:r /grant:r %%USERNAME%%:F)", ErrUnsafe, path, e.sid, e.rights&forbidden, path)
			}
			return fmt.Errorf("%w: %s lets %s change %s (rights %#x): another user could change what is in it", ErrUnsafe, path, e.sid,
				map[bool]string{true: "what is in it", false: "it"}[ancestor], e.rights&forbidden)
		}
	}
	return nil
}

// aclEntry is one entry of a DACL.
type aclEntry struct {
	allow, inheritOnly bool
	rights             uint32
	sid                string
}

// parseSDDL reads a security descriptor's owner and DACL from its SDDL string
// ("O:owner G:group D:flags(ace)(ace)…"). A nil DACL is a null one (no access control);
// an empty one allows nothing.
func parseSDDL(s string) (owner string, dacl []aclEntry, err error) {
	sections := map[byte]string{}
	for i := 0; i < len(s); {
		if i+1 >= len(s) || s[i+1] != ':' || !strings.ContainsRune("OGDS", rune(s[i])) {
			return "", nil, fmt.Errorf("unexpected %q", s[i:])
		}
		tag, j := s[i], i+2
		depth := 0
		for ; j < len(s); j++ {
			switch {
			case s[j] == '(':
				depth++
			case s[j] == ')':
				depth--
			case depth == 0 && j+1 < len(s) && s[j+1] == ':' && strings.ContainsRune("OGDS", rune(s[j])):
				goto end
			}
		}
	end:
		if _, twice := sections[tag]; twice {
			return "", nil, fmt.Errorf("two %c: sections", tag)
		}
		sections[tag] = s[i+2 : j]
		i = j
	}
	owner = sections['O']
	if owner == "" {
		return "", nil, fmt.Errorf("no owner")
	}
	owner = account(owner)
	d, ok := sections['D']
	if !ok {
		return "", nil, fmt.Errorf("no access list")
	}
	flags, aces, _ := strings.Cut(d, "(")
	if strings.Contains(flags, "NO_ACCESS_CONTROL") {
		return owner, nil, nil
	}
	dacl = []aclEntry{}
	if aces == "" {
		return owner, dacl, nil
	}
	for _, ace := range strings.Split(strings.TrimSuffix("("+aces, ")"), ")") {
		f := strings.Split(strings.TrimPrefix(ace, "("), ";")
		if len(f) != 6 {
			return "", nil, fmt.Errorf("an entry %q of %d fields", ace, len(f))
		}
		rights, err := parseRights(f[2])
		if err != nil {
			return "", nil, err
		}
		var allow bool
		switch f[0] {
		case "A", "OA", "XA", "ZA": // allowed: plain, object, callback, callback object
			allow = true
		case "D", "OD", "XD", "ZD": // denied: it only takes rights away
		case "AU", "AL", "OU", "OL", "ML", "SP", "RA", "XU", "TL", "FL": // audit, alarm and label entries grant nothing
		default:
			return "", nil, fmt.Errorf("an entry of unknown type %q", f[0])
		}
		inheritOnly, err := hasFlag(f[1], "IO")
		if err != nil {
			return "", nil, err
		}
		dacl = append(dacl, aclEntry{allow: allow, inheritOnly: inheritOnly, rights: rights, sid: account(f[5])})
	}
	return owner, dacl, nil
}

// hasFlag says whether an entry's flags (two-letter tokens: OI, CI, NP, IO, ID, SA,
// FA) hold flag.
func hasFlag(flags, flag string) (bool, error) {
	if len(flags)%2 != 0 {
		return false, fmt.Errorf("entry flags %q", flags)
	}
	found := false
	for i := 0; i < len(flags); i += 2 {
		switch t := flags[i : i+2]; t {
		case "OI", "CI", "NP", "IO", "ID", "SA", "FA", "TP", "CR":
			found = found || t == flag
		default:
			return false, fmt.Errorf("unknown entry flag %q", t)
		}
	}
	return found, nil
}

// parseRights reads an entry's rights: a hexadecimal mask, or abbreviations.
func parseRights(r string) (uint32, error) {
	if strings.HasPrefix(r, "0x") || strings.HasPrefix(r, "0X") {
		n, err := strconv.ParseUint(r[2:], 16, 32)
		return uint32(n), err
	}
	if len(r)%2 != 0 {
		return 0, fmt.Errorf("rights %q", r)
	}
	var mask uint32
	for i := 0; i < len(r); i += 2 {
		m, ok := sddlRights[r[i:i+2]]
		if !ok {
			return 0, fmt.Errorf("unknown right %q", r[i:i+2])
		}
		mask |= m
	}
	return mask, nil
}

// account is an SDDL account as a SID string: its abbreviation expanded where it is one
// of the machine's own; other abbreviations (WD everyone, BU users, AU authenticated
// users…) stay as they are, and are others.
func account(a string) string {
	if sid, ok := sddlAccounts[a]; ok {
		return sid
	}
	return a
}
