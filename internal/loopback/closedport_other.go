//go:build !unix

package loopback

// closedPort listens on a port the system chooses and closes the
// listener: another process could take the port afterwards.
func closedPort() (string, func(), error) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", nil, err
	}
	return addr, func() {}, nil
}
