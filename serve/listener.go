package serve

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// busyResponse is what a connection over the limit gets before it is
// closed: a clear 503 rather than a connection left hanging in the backlog.
var busyResponse = func() []byte {
	const body = "too many connections to the server; retry\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// limitListener accepts at most max open connections; each one over
// that is answered 503 and closed.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			go refuse(c)
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// refuse writes busyResponse without reading the request: a client that
// does not read is cut off by the deadline.
func refuse(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write(busyResponse)
	c.Close()
}

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
