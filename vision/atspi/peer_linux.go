//go:build linux

package atspi

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// socketPeerUID connects to the unix socket (a leading @ names an abstract one) and
// reads the user id of the process listening on it, as the kernel recorded it.
func socketPeerUID(ctx context.Context, socket string) (uint32, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("reading the peer's credentials of %s: %w", socket, credErr)
	}
	return cred.Uid, nil
}
