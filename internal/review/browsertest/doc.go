// Package browsertest opens the review page (`gpuguard report --html`) in
// a real browser, Debian's chromium driven through chromedp, and checks
// what a person gets: no console error, no request leaving the page, a
// section per instance, a mark per journaled event of the kinds the page
// marks, the verdicts, a 1280x800 screenshot, and a week of 10,000 events
// under 2 MB, its load-and-paint time measured (target under 2 s).
//
// It is a module of its own, as deploy/kubernetes/validate is, so that
// gpuguard's go.mod stays free of chromedp. The page is made by the real
// binary from journals written by the real journal package.
//
// The tests skip when no chromium is installed, unless CI is set: in CI a
// missing browser is a failure, not a pass. As root, chromium runs with
// --no-sandbox.
package browsertest
