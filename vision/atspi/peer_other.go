//go:build !linux

package atspi

import (
	"context"
	"errors"
)

// socketPeerUID cannot read a socket's peer here: the accessibility bus is read on
// Linux only.
func socketPeerUID(context.Context, string) (uint32, error) {
	return 0, errors.New("reading a socket's peer is done on Linux only")
}
