// Package trend tells where GPU memory is heading from the watermark
// samples of the last few seconds, and what follows from that: how soon to
// take the next sample, how long until the watermark reaches critical, and
// whether that comes within the policy's lead.
//
// The estimator is ordinary least squares over a window of (time, ratio)
// samples, the method of Prometheus's predict_linear. It was chosen over
// Holt's double exponential smoothing because it needs no tuning constant,
// handles the irregular spacing that adaptive polling produces (Holt
// assumes evenly spaced samples), and comes with a standard error, which is
// what "a trend that stands out from the samples' scatter" needs. Two fits
// are used: over about the last second (the polling period follows it) and
// over the last 10 s (predicted step-downs and eta_seconds follow it).
//
// Everything here is a pure function of the samples except Tracker, which
// holds the samples (a fixed ring, no allocation per sample) and the time
// the watermark last rose. docs/sensing.md explains the rules and their
// behaviour on noise.
package trend
