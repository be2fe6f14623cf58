// Package browser opens a page file in headless Chromium and reports what
// the page did: its console errors and uncaught exceptions, its load time.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// Path returns Chromium's path, or an error saying how to install it.
func Path() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium not installed: run .ci/services (apt-get install chromium)")
}

// Browser is a headless Chromium with one tab.
type Browser struct {
	Ctx    context.Context
	cancel []context.CancelFunc

	mu     sync.Mutex
	errors []string
	done   chan struct{}
}

// Open starts Chromium at path, its window w×h.
func Open(ctx context.Context, path string, w, h int) (*Browser, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(w, h), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	cctx, cancelC := chromedp.NewContext(actx)
	b := &Browser{Ctx: cctx, cancel: []context.CancelFunc{cancelC, cancelA}}
	// The browser starts with the first action; the console is read from
	// then on, in a goroutine that ends with the context.
	if err := chromedp.Do(cctx, chromedp.Navigate("about:blank")); err != nil {
		b.Close()
		return nil, err
	}
	msgs := chromedp.Console(cctx)
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" {
				b.add(m.String())
			}
		}
	}()
	return b, nil
}

func (b *Browser) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, s)
}

// Errors returns the console errors and exceptions seen so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Load opens the page file and waits for its load event; it returns the
// time from the navigation's start to the load event's end, as the page's
// own Navigation Timing says.
func (b *Browser) Load(file string) (time.Duration, error) {
	if _, err := os.Stat(file); err != nil {
		return 0, err
	}
	if err := chromedp.Do(b.Ctx, chromedp.Navigate("file://"+file)); err != nil {
		return 0, fmt.Errorf("loading %s: %w", file, err)
	}
	ms, err := chromedp.Run(b.Ctx, chromedp.Evaluate[float64](
		`(() => { const n = performance.getEntriesByType("navigation")[0]; return n.loadEventEnd - n.startTime; })()`))
	if err != nil {
		return 0, fmt.Errorf("loading %s: %w", file, err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// Close stops Chromium.
func (b *Browser) Close() {
	for _, c := range b.cancel {
		c()
	}
	if b.done != nil {
		<-b.done
	}
}
