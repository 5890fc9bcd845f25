package main

// Client-side truth of what a Go client wrote: every connection the client dials goes
// through wireConn, which reads the request headers out of the bytes the client writes
// (size, api_key, api_version, correlation_id, client_id: the request header v1+ prefix)
// and logs each as one JSON line to the -wire file, with the connection's local port.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"sync"
)

type wireRequest struct {
	ClientPort    int     `json:"client_port"`
	APIKey        int16   `json:"api_key"`
	APIVersion    int16   `json:"api_version"`
	CorrelationID int32   `json:"correlation_id"`
	ClientID      *string `json:"client_id"`
	Size          int32   `json:"size"`
}

// wireLog is the dialer of every client: TCP, TLS when tls is set (the header log then
// sees the plaintext the client writes into TLS), the header log when out is set.
type wireLog struct {
	mu  sync.Mutex
	out *os.File
	tls *tls.Config
}

func openWireLog(path string, tlsConfig *tls.Config) *wireLog {
	if path == "" && tlsConfig == nil {
		return nil
	}
	w := &wireLog{tls: tlsConfig}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			panic(err)
		}
		w.out = f
	}
	return w
}

func (w *wireLog) log(r wireRequest) {
	if w.out == nil {
		return
	}
	b, _ := json.Marshal(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(append(b, '\n'))
}

type wireConn struct {
	net.Conn
	log  *wireLog
	port int
	buf  []byte // bytes of the frame being written
	skip int64  // body bytes of the current frame still to pass
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.observe(p)
	return c.Conn.Write(p)
}

func (c *wireConn) observe(p []byte) {
	for len(p) > 0 {
		if c.skip > 0 {
			n := int64(len(p))
			if n > c.skip {
				n = c.skip
			}
			c.skip -= n
			p = p[n:]
			continue
		}
		c.buf = append(c.buf, p...)
		p = nil
		for {
			if len(c.buf) < 14 {
				break
			}
			size := int32(binary.BigEndian.Uint32(c.buf))
			r := wireRequest{ClientPort: c.port, Size: size,
				APIKey:        int16(binary.BigEndian.Uint16(c.buf[4:])),
				APIVersion:    int16(binary.BigEndian.Uint16(c.buf[6:])),
				CorrelationID: int32(binary.BigEndian.Uint32(c.buf[8:]))}
			idLen := int16(binary.BigEndian.Uint16(c.buf[12:]))
			if idLen >= 0 {
				if len(c.buf) < 14+int(idLen) {
					break
				}
				s := string(c.buf[14 : 14+int(idLen)])
				r.ClientID = &s
			}
			c.log.log(r)
			rest := int64(size) + 4
			if int64(len(c.buf)) >= rest {
				c.buf = c.buf[rest:]
				continue
			}
			c.skip = rest - int64(len(c.buf))
			c.buf = c.buf[:0]
			break
		}
	}
}

func (w *wireLog) wrap(conn net.Conn) net.Conn {
	if w == nil {
		return conn
	}
	port := conn.LocalAddr().(*net.TCPAddr).Port
	return &wireConn{Conn: conn, log: w, port: port}
}

// dialContext dials TCP and wraps the connection (franz-go's kgo.Dialer).
func (w *wireLog) dialContext(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	if w.tls != nil {
		cfg := w.tls.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(host)
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return w.wrap(tc), nil
	}
	return w.wrap(conn), nil
}

// Dial is sarama's proxy.Dialer.
func (w *wireLog) Dial(network, addr string) (net.Conn, error) {
	return w.dialContext(context.Background(), network, addr)
}
