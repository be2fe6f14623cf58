// Package viztest tests connaudit's pictures in a real browser: Debian's
// chromium, headless, driven with chromedp over the DevTools protocol. It
// is a module of its own so that the main module never depends on
// chromedp.
//
// Its tests open each page from a file, as a CI artifact is opened (a
// probe of nginx, scenarios, a serve session), and check it there: no console error, a lane per connection the JSON lists,
// each closed lane's reason as the JSON says. With -docs DIR they write the
// screenshots docs/ shows (go test ./... -args -docs ../docs).
//
// cmd/loadtime times a page's load in Chromium, for bench/pictures.sh.
package viztest
