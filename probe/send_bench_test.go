package probe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/connaudit/connaudit/internal/benchpair"
	"github.com/connaudit/connaudit/internal/vocab"
)

// BenchmarkSendPaired measures the probe's main-run request path side by
// side with the plain loop bench/compare.sh compares the probe with
// (bench/cmd/plainloop: a bare http.Client, one kept-alive connection, a
// 30 s client timeout). The probe's path is a request through its tracked
// pool with its per-request timeout, the body read, and the aggregator that
// folds each timeline into the report; it leaves out what a probe does once
// (process start, dial, report). The overhead-% it reports is what the
// probe's throughput ratio is made of, measured with the precision of a
// paired benchmark:
//
//	go test -run '^$' -bench SendPaired -count 10 ./probe > out.txt
//	benchstat -filter '.unit:overhead-%' out.txt
//
// With CONNAUDIT_BENCH_URL set to a loopback http URL (bench/cmd/okserver
// prints one) both clients send to that server, in another process, as the
// probe does.
func BenchmarkSendPaired(b *testing.B) {
	target := benchpair.Target(b)
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		b.Fatal(err)
	}

	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	plain := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	// The probe's context, as `connaudit probe` sets it: its -deadline.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	pr := &prober{cfg: defaults(), target: req, start: time.Now(), ctx: ctx}
	agg := newAggregator(ctx, false, pr.cfg.timeout, pr.cfg.maxBody)
	p, client, err := pr.newPool(agg, 1, 1, pr.cfg.clientIdle, true)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()

	snd := pr.newSender(client)
	defer snd.close()
	sent := 0
	clients := [2]func(int) error{
		func(n int) error {
			for range n {
				resp, err := plain.Do(req)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
			}
			return nil
		},
		func(n int) error {
			for range n {
				if !snd.send() {
					return errors.New("request not sent")
				}
				sent++
			}
			return nil
		},
	}
	for _, c := range clients { // dial outside the measurement
		if err := c(2); err != nil {
			b.Fatal(err)
		}
	}
	benchpair.Run(b, [2]string{"plain", "probe"}, clients)

	rep := &Result{}
	agg.fill(rep)
	if ok := rep.Outcomes[vocab.ClassOK]; ok != sent {
		b.Fatalf("%d of %d probe requests ok: %v", ok, sent, rep.Outcomes)
	}
	if d := p.Stats().Dials; d != 1 {
		b.Fatalf("the probe's pool dialed %d times, want 1", d)
	}
}
