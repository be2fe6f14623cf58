module github.com/connaudit/connaudit/viztest

go 1.26.0

require (
	github.com/chromedp/chromedp v0.24.0
	github.com/connaudit/connaudit v0.0.0
)

require (
	github.com/chromedp/cdproto v0.160.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/connaudit/connaudit => ../
