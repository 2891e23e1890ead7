package files

import (
	"errors"
	"testing"
)

// TestCheckSDDL: the Windows rule over security descriptors as Windows prints them.
func TestCheckSDDL(t *testing.T) {
	const me = "S-1-5-21-1004336348-1177238915-682003330-1001"
	const other = "S-1-5-21-1004336348-1177238915-682003330-1002"
	for _, tc := range []struct {
		name     string
		sddl     string
		ancestor bool
		safe     bool
	}{
		{"a user's private folder", "O:" + me + "G:" + me + "D:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;" + me + ")", false, true},
		{"the same, by hexadecimal rights", "O:" + me + "D:P(A;OICI;0x1f01ff;;;" + me + ")(A;OICI;0x1f01ff;;;SY)", false, true},
		{"owned by another user", "O:" + other + "D:PAI(A;OICI;FA;;;" + other + ")", false, false},
		{"owned by the administrators: not a private folder", "O:BAD:PAI(A;OICI;FA;;;BA)", false, false},
		{"everyone may write", "O:" + me + "D:PAI(A;OICI;FA;;;" + me + ")(A;OICI;0x1301bf;;;WD)", false, false},
		{"users may add files", "O:" + me + "D:AI(A;OICI;FA;;;" + me + ")(A;CI;DC;;;BU)", false, false},
		{"another user may change its permissions", "O:" + me + "D:(A;;FA;;;" + me + ")(A;;WD;;;" + other + ")", false, false},
		{"everyone may read and run", "O:" + me + "D:(A;OICI;FA;;;" + me + ")(A;OICI;FRFX;;;WD)", false, true},
		{"a deny entry takes nothing away from the rule", "O:" + me + "D:(D;;FA;;;WD)(A;;FA;;;" + me + ")", false, true},
		{"an inherit-only entry does not apply here", "O:" + me + "D:(A;OICIIO;GA;;;CO)(A;;FA;;;" + me + ")", false, true},
		{"no access list at all", "O:" + me + "D:NO_ACCESS_CONTROL", false, false},
		{"an empty access list", "O:" + me + "D:P", false, true},
		{"C:\\ as Windows makes it", "O:S-1-5-80-956008885-3425701886-2239341545-2356924512-1741879541G:S-1-5-80-956008885-3425701886-2239341545-2356924512-1741879541D:PAI(A;OICIIO;GA;;;CO)(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;0x1200a9;;;BU)(A;CI;LC;;;AU)(A;;0x100004;;;AU)", true, true},
		{"an ancestor others may add to", "O:SYD:(A;OICI;FA;;;SY)(A;CI;DCLC;;;AU)", true, true},
		{"an ancestor others may delete from", "O:SYD:(A;OICI;FA;;;SY)(A;CI;DT;;;AU)", true, false},
		{"an ancestor another user owns", "O:" + other + "D:(A;OICI;FA;;;" + other + ")", true, false},
		{"inherit-only read in the flags' letters (CIOI is not IO)", "O:" + me + "D:(A;;FA;;;" + me + ")(A;CIOI;FA;;;" + other + ")", false, false},
		{"a callback allow entry is an allow entry", "O:" + me + "D:(A;;FA;;;" + me + ")(XA;;FA;;;" + other + ")", false, false},
		{"an entry of a type unknown here", "O:" + me + "D:(A;;FA;;;" + me + ")(QQ;;FA;;;" + other + ")", false, false},
		{"an audit entry grants nothing", "O:" + me + "D:(A;;FA;;;" + me + ")S:(AU;SA;FA;;;WD)", false, true},
	} {
		err := checkSDDL(`C:\x`, tc.sddl, me, tc.ancestor, func(a, b string) bool { return a == b })
		if (err == nil) != tc.safe || (err != nil && !errors.Is(err, ErrUnsafe)) {
			t.Errorf("%s: %v; want safe %v", tc.name, err, tc.safe)
		}
	}
}

// FuzzParseSDDL: any text is read or refused, never a panic; what parses names an
// owner.
func FuzzParseSDDL(f *testing.F) {
	for _, s := range []string{"O:SYD:PAI(A;OICI;FA;;;SY)", "O:BAG:BAD:NO_ACCESS_CONTROL", "D:(A;;;;;)", "O:", "O:SYD:(A;;0xZZ;;;WD)", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		owner, _, err := parseSDDL(s)
		if err == nil && owner == "" {
			t.Fatalf("%q parsed with no owner", s)
		}
		_ = checkSDDL("x", s, "S-1-5-21-1", false, func(a, b string) bool { return a == b })
	})
}

// TestCheckSecretSDDL: on Windows a secret's file may be read or changed by no one but
// its owner (and the machine's administrators).
func TestCheckSecretSDDL(t *testing.T) {
	const me = "S-1-5-21-1004336348-1177238915-682003330-1001"
	const other = "S-1-5-21-1004336348-1177238915-682003330-1002"
	for _, tc := range []struct {
		name, sddl string
		safe       bool
	}{
		{"mine alone", "O:" + me + "D:PAI(A;;FA;;;SY)(A;;FA;;;BA)(A;;FA;;;" + me + ")", true},
		{"everyone may read", "O:" + me + "D:(A;;FA;;;" + me + ")(A;;FR;;;WD)", false},
		{"users may read and run", "O:" + me + "D:(A;;FA;;;" + me + ")(A;;0x1200a9;;;BU)", false},
		{"another user may read data", "O:" + me + "D:(A;;FA;;;" + me + ")(A;;CC;;;" + other + ")", false},
		{"generic read for another user", "O:" + me + "D:(A;;FA;;;" + me + ")(A;;GR;;;" + other + ")", false},
		{"another user may write", "O:" + me + "D:(A;;FA;;;" + me + ")(A;;FW;;;" + other + ")", false},
		{"owned by another user", "O:" + other + "D:(A;;FA;;;" + me + ")", false},
		{"another user may only read its permissions", "O:" + me + "D:(A;;FA;;;" + me + ")(A;;RC;;;" + other + ")", true},
		{"no access list", "O:" + me + "D:NO_ACCESS_CONTROL", false},
	} {
		err := checkSecretSDDL(`C:\x`, tc.sddl, me, func(a, b string) bool { return a == b })
		if (err == nil) != tc.safe || (err != nil && !errors.Is(err, ErrUnsafe)) {
			t.Errorf("%s: %v; want safe %v", tc.name, err, tc.safe)
		}
	}
}
