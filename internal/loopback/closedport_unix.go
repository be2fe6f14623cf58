//go:build unix

package loopback

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// closedPort binds a socket to 127.0.0.1 on a port the system chooses, and
// one to the same port on ::1 where the machine has IPv6, without
// SO_REUSEADDR and without listening: a connect is refused, and no other
// socket can bind the port while they are open. A port taken on ::1 already
// is given up for another, a few times.
func closedPort() (string, func(), error) {
	for range 10 {
		fd4, port, err := bindLoopback(syscall.AF_INET, 0)
		if err != nil {
			return "", nil, err
		}
		fds := []int{fd4}
		fd6, _, err := bindLoopback(syscall.AF_INET6, port)
		switch {
		case err == nil:
			fds = append(fds, fd6)
		case errors.Is(err, syscall.EADDRINUSE):
			syscall.Close(fd4)
			continue
		}
		// Any other error on ::1: the machine has no IPv6 loopback to
		// reach, so nothing can listen there.
		var once sync.Once
		release := func() {
			once.Do(func() {
				for _, fd := range fds {
					syscall.Close(fd)
				}
			})
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), release, nil
	}
	return "", nil, errors.New("loopback: no port free on both 127.0.0.1 and ::1 in 10 tries")
}

// bindLoopback returns a TCP socket of family bound to its loopback address
// and port (0: one the system chooses), and the port.
func bindLoopback(family, port int) (int, int, error) {
	// Under ForkLock, as package net makes sockets where it cannot ask for
	// close-on-exec at once: a process started meanwhile (serve starts
	// kits) must not inherit the socket, and hold the port past its release.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, 0, fmt.Errorf("loopback: socket: %w", err)
	}
	var sa syscall.Sockaddr = &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	if family == syscall.AF_INET6 {
		if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, 1); err != nil {
			syscall.Close(fd)
			return -1, 0, fmt.Errorf("loopback: IPV6_V6ONLY: %w", err)
		}
		sa = &syscall.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return -1, 0, fmt.Errorf("loopback: bind: %w", err)
	}
	got, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return -1, 0, fmt.Errorf("loopback: getsockname: %w", err)
	}
	switch a := got.(type) {
	case *syscall.SockaddrInet4:
		return fd, a.Port, nil
	case *syscall.SockaddrInet6:
		return fd, a.Port, nil
	}
	syscall.Close(fd)
	return -1, 0, fmt.Errorf("loopback: bound to %T", got)
}
