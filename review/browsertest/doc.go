// Package browsertest opens the review page in a real browser (Debian's
// chromium, through chromedp) and checks what a person would see. It is a
// module of its own so that gpuguard's go.mod stays free of chromedp.
package browsertest
