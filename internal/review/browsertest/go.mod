module github.com/gpuguard/gpuguard/internal/review/browsertest

go 1.26.7

require (
	github.com/chromedp/cdproto v0.160.1
	github.com/chromedp/chromedp v0.23.1
	github.com/gpuguard/gpuguard v0.0.0
)

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/gpuguard/gpuguard => ../../..
