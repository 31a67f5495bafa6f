package main

import (
	"math"
	"slices"
	"time"
)

// summary is the latency distribution of one target's measured calls, in
// milliseconds. Percentiles use the nearest-rank method on the sorted
// samples (p-th percentile = sample ceil(p·n)), so every figure is a latency
// that was actually observed; the median is the 50th percentile.
type summary struct {
	Median float64
	P90    float64
	P99    float64
	Max    float64
	Mean   float64
}

// summarize returns the distribution of samples; all zero when there are none.
// It sorts a copy: samples is left as it is.
func summarize(samples []time.Duration) summary {
	if len(samples) == 0 {
		return summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var total time.Duration
	for _, d := range s {
		total += d
	}
	return summary{
		Median: ms(percentile(s, 0.50)),
		P90:    ms(percentile(s, 0.90)),
		P99:    ms(percentile(s, 0.99)),
		Max:    ms(s[len(s)-1]),
		Mean:   ms(total / time.Duration(len(s))),
	}
}

// percentile is the nearest-rank p-quantile (0 < p ≤ 1) of sorted, which
// must not be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p * float64(len(sorted))))
	rank = max(rank, 1)
	rank = min(rank, len(sorted))
	return sorted[rank-1]
}

// ms converts d to milliseconds rounded to the microsecond.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}
