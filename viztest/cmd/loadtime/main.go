// Command loadtime opens each page file given in headless Chromium and
// prints the time from navigation to the end of its load event, and the
// number of lanes drawn: go run ./cmd/loadtime FILE...
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/connaudit/connaudit/viztest/browser"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadtime FILE...")
		os.Exit(2)
	}
	path, err := browser.Path()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtime:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := browser.Open(ctx, path, 1400, 900)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtime:", err)
		os.Exit(1)
	}
	defer b.Close()
	for _, f := range os.Args[1:] {
		abs, _ := filepath.Abs(f)
		d, err := b.Load(abs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtime:", err)
			os.Exit(1)
		}
		lanes, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("g.lane").length`))
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtime:", err)
			os.Exit(1)
		}
		st, _ := os.Stat(abs)
		fmt.Printf("%s: %d lanes, %d bytes, loaded in %.0f ms, console errors: %d\n", f, lanes, st.Size(),
			float64(d)/float64(time.Millisecond), len(b.Errors()))
	}
}
