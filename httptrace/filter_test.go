package httptrace_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/httptrace"
	"github.com/connaudit/connaudit/internal/vocab"
)

// kindRecorder is an EventObserver that counts the kinds of the events it
// receives, and asks for some kinds only when kinds is not zero.
type kindRecorder struct {
	kinds vocab.KindSet
	mu    sync.Mutex
	seen  map[httptrace.Kind]int
}

func (k *kindRecorder) Observe(*httptrace.Timeline) {}

func (k *kindRecorder) ObserveEvent(_ *httptrace.Timeline, ev httptrace.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen == nil {
		k.seen = map[httptrace.Kind]int{}
	}
	k.seen[ev.Kind]++
}

func (k *kindRecorder) got() map[httptrace.Kind]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen
}

// filtered asks for some kinds of events only.
type filtered struct{ *kindRecorder }

func (f filtered) EventKinds() vocab.KindSet { return f.kinds }

// TestEventFilter checks that an observer that asks for some kinds of
// events gets those alone, on its own and through Multi, while another
// observer in the same Multi still gets every kind; and that the outcome
// and the timeline do not depend on it.
func TestEventFilter(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	want := vocab.Of(vocab.KindGotConn, vocab.KindDone)

	t.Run("alone", func(t *testing.T) {
		f := filtered{&kindRecorder{kinds: want}}
		tr, err := httptrace.NewTransport(newBase(t, nil), httptrace.WithObserver(f))
		require.NoError(t, err)
		for range 3 {
			require.Equal(t, "ok", string(fetch(t, tr, srv.URL)))
		}
		require.Equal(t, map[httptrace.Kind]int{vocab.KindGotConn: 3, vocab.KindDone: 3}, f.got())
	})

	t.Run("multi", func(t *testing.T) {
		f := filtered{&kindRecorder{kinds: want}}
		all := &kindRecorder{}
		none := filtered{&kindRecorder{kinds: 0}} // asks for nothing
		tr, c := traced(t, newBase(t, nil), []httptrace.Observer{f, all, none})
		for range 3 {
			require.Equal(t, "ok", string(fetch(t, tr, srv.URL)))
		}
		tls := waitTimelines(t, c, 3)
		require.Equal(t, map[httptrace.Kind]int{vocab.KindGotConn: 3, vocab.KindDone: 3}, f.got())
		require.Empty(t, none.got())
		// The unfiltered observer got every event of every timeline.
		counts := map[httptrace.Kind]int{}
		for _, tl := range tls {
			require.Equal(t, vocab.ClassOK, tl.Outcome.Class)
			for _, ev := range tl.Events {
				counts[ev.Kind]++
			}
		}
		require.Equal(t, counts, all.got())
		require.Greater(t, len(counts), 5, "a request has more kinds of events than the filter lets through")
	})
}
