package atspi

import (
	"fmt"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// AddressOnDisplay reads the accessibility bus's address where the bus launcher of the
// session on that X display publishes it: the root window's AT_SPI_BUS property (as the
// toolkits' own bridges find it). The app's session may belong to another OS user.
func AddressOnDisplay(display string) (string, error) {
	x, err := xgb.NewConnDisplay(display)
	if err != nil {
		return "", fmt.Errorf("%w: the display %s: %v", ErrUnavailable, display, err)
	}
	defer x.Close()
	atom, err := xproto.InternAtom(x, true, uint16(len("AT_SPI_BUS")), "AT_SPI_BUS").Reply()
	if err != nil {
		return "", fmt.Errorf("%w: the display %s: %v", ErrUnavailable, display, err)
	}
	if atom.Atom == xproto.AtomNone {
		return "", fmt.Errorf("%w: no accessibility bus on display %s (no AT_SPI_BUS on its root window): start the app with its accessibility bridge (GTK 3: Debian's libatk-adaptor and no NO_AT_BRIDGE=1; Qt: QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1) in a session with at-spi2-core", ErrUnavailable, display)
	}
	root := xproto.Setup(x).DefaultScreen(x).Root
	p, err := xproto.GetProperty(x, false, root, atom.Atom, xproto.AtomString, 0, 1024).Reply()
	if err != nil || len(p.Value) == 0 {
		return "", fmt.Errorf("%w: no accessibility bus on display %s (AT_SPI_BUS is empty): %v", ErrUnavailable, display, err)
	}
	return string(p.Value), nil
}
