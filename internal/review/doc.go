// Package review draws the weekly review page (`gpuguard report --html`):
// one self-contained HTML page per period, a section per instance with a
// timeline, the report's figures and a verdict against the budget.
//
// It is built on package report's Summary of each instance and on the
// journal that summary was made from, read by the caller through the same
// code `report` uses (report/instances); it reads no file itself. The page is
// html/template with inline SVG drawn here: no script, no font, no image
// and no style sheet is fetched, so the page opens from disk, in a mail
// attachment or on an air-gapped host, and prints. A charting library was
// no option: go-echarts loads ECharts from a CDN, and ECharts inlined is
// 1.1 MB.
//
// The timeline is bounded whatever the journal holds: the per-minute
// watermark records are folded into one column per horizontal unit of the
// picture (a week is 10,080 records, the picture some 900 columns), so
// only the marks, one per event that a person would look for, grow with
// the journal. A week of 10,000 such events stays under 2 MB.
//
// All instances share one time axis, the union of their periods, so that
// sections one under another line up: a step of one instance sits above
// or below the load of its neighbours on the same GPU, which each section
// names.
package review
