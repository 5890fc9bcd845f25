// The Go clients of the real-broker tests: franz-go (kgo, kadm) and IBM sarama, one
// scenario per command; client-side truth as JSON lines on stdout (records produced with
// their offsets, records consumed, each admin operation's Kafka error code) and, with
// -wire FILE, every request header the client wrote (wire.go).
//
// TLS (the SSL listener): -tls-ca CA.pem [-keylog FILE] [-tls-max 1.2|1.3]
// [-tls-ciphers NAMES] [-tls-resume] (a session cache: later connections resume the first's
// session, with a TLS 1.2 session ticket or a TLS 1.3 PSK).
//
//	kclients [-wire FILE] franz-produce  BOOTSTRAP TOPIC TAG N SPEC...  (SPEC codec:acks:plain|idempotent|txn)
//	kclients [-wire FILE] franz-consume  BOOTSTRAP TOPIC CLIENT_ID GROUP classic|consumer N
//	kclients [-wire FILE] franz-share    BOOTSTRAP TOPIC CLIENT_ID GROUP N
//	kclients [-wire FILE] franz-admin    BOOTSTRAP TAG CLIENT_ID
//	kclients [-wire FILE] sarama-produce BOOTSTRAP TOPIC TAG N SPEC...
//	kclients [-wire FILE] sarama-consume BOOTSTRAP TOPIC CLIENT_ID GROUP N
//	kclients [-wire FILE] sarama-admin   BOOTSTRAP TAG CLIENT_ID
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
)

var stdout sync.Mutex

func emit(kv ...any) {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

// errorCode is the Kafka error code of err: 0 for nil, -2 when err carries none.
func errorCode(err error) int {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return int(ke.Code)
	}
	var se sarama.KError
	if errors.As(err, &se) {
		return int(se)
	}
	var te *sarama.TopicError
	if errors.As(err, &te) {
		return int(te.Err)
	}
	var pe *sarama.TopicPartitionError
	if errors.As(err, &pe) {
		return int(pe.Err)
	}
	return -2
}

func admin(op string, err error) {
	m := []any{"event", "admin", "op", op, "error_code", errorCode(err)}
	if err != nil {
		m = append(m, "error", err.Error())
	}
	emit(m...)
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	fail(err)
	return n
}

// value is record i's value: the client id, i and 200 bytes that compress well (franz-go
// sends a batch uncompressed when compressing does not make it smaller).
func value(clientID string, i int) string {
	return fmt.Sprintf("%s-%d-%s", clientID, i, strings.Repeat("x", 200))
}

func specs(tag string, args []string) [][4]string {
	var out [][4]string
	for _, s := range args {
		p := strings.Split(s, ":")
		out = append(out, [4]string{tag + "-" + strings.Join(p, "-"), p[0], p[1], p[2]})
	}
	return out
}

// tlsConfig is the TLS configuration of the -tls-* flags, nil without -tls-ca. The key log
// is Go's tls.Config.KeyLogWriter (NSS format: CLIENT_RANDOM for TLS 1.2, the
// *_TRAFFIC_SECRET_* labels for TLS 1.3).
func tlsConfig(ca, keylog, max, ciphers string, resume bool) *tls.Config {
	if ca == "" {
		return nil
	}
	pem, err := os.ReadFile(ca)
	fail(err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fail(fmt.Errorf("no certificate in %s", ca))
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}
	if max == "1.2" {
		cfg.MaxVersion = tls.VersionTLS12
	}
	if resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(16)
	}
	if keylog != "" {
		f, err := os.OpenFile(keylog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		fail(err)
		cfg.KeyLogWriter = f
	}
	if ciphers != "" {
		byName := map[string]uint16{}
		for _, c := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
			byName[c.Name] = c.ID
		}
		for _, name := range strings.Split(ciphers, ",") {
			id, ok := byName[name]
			if !ok {
				fail(fmt.Errorf("unknown cipher suite %s", name))
			}
			cfg.CipherSuites = append(cfg.CipherSuites, id)
		}
	}
	return cfg
}

func main() {
	wire := flag.String("wire", "", "log every request header the client writes to this file")
	tlsCA := flag.String("tls-ca", "", "connect with TLS, trusting this CA certificate (PEM)")
	keylog := flag.String("keylog", "", "append the TLS session secrets (NSS key log) to this file")
	tlsMax := flag.String("tls-max", "1.3", "the highest TLS version: 1.2 or 1.3")
	ciphers := flag.String("tls-ciphers", "", "TLS 1.2 cipher suites (Go names, comma-separated)")
	resume := flag.Bool("tls-resume", false, "resume TLS sessions across the client's connections")
	flag.Parse()
	a := flag.Args()
	w := openWireLog(*wire, tlsConfig(*tlsCA, *keylog, *tlsMax, *ciphers, *resume))
	switch a[0] {
	case "franz-produce":
		for _, s := range specs(a[3], a[5:]) {
			franzProduce(w, a[1], a[2], s, atoi(a[4]))
		}
	case "franz-consume":
		franzConsume(w, a[1], a[2], a[3], a[4], a[5], atoi(a[6]))
	case "franz-share":
		franzShare(w, a[1], a[2], a[3], a[4], atoi(a[5]))
	case "franz-admin":
		franzAdmin(w, a[1], a[2], a[3])
	case "sarama-produce":
		for _, s := range specs(a[3], a[5:]) {
			saramaProduce(w, a[1], a[2], s, atoi(a[4]))
		}
	case "sarama-consume":
		saramaConsume(w, a[1], a[2], a[3], a[4], atoi(a[5]))
	case "sarama-admin":
		saramaAdmin(w, a[1], a[2], a[3])
	default:
		fail(fmt.Errorf("unknown command %s", a[0]))
	}
}
