package policy

import (
	"math"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"0", 0},
		{"123", 123},
		{"512B", 512},
		{"1KiB", 1024},
		{"16GiB", 16 << 30},
		{"16 GiB", 16 << 30},
		{" 16gib ", 16 << 30},
		{"1.5GiB", 1610612736},
		{"1.5GB", 1_500_000_000},
		{"1KB", 1000},
		{"2MB", 2_000_000},
		{"3TB", 3_000_000_000_000},
		{"1TiB", 1 << 40},
		{"40MiB", 40 << 20},
		{"0.5KiB", 512},
		{".5KiB", 512},
		{"1.1KiB", 1126}, // 1126.4 rounds down
		{"16EiB", 0},     // overflow, checked below
		{"15EiB", 15 << 60},
		{"18446744073709551615", math.MaxUint64},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.in == "16EiB" {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want overflow error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, in := range []string{"", " ", "GiB", "-1GiB", "1.2.3GiB", "1e9", "16G", "16 gigs", "1/2GiB", ".", "18446744073709551616", "99999999999999999999.5TB"} {
		if n, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want error", in, n)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{40 << 30, "40 GiB"},
		{1610612736, "1.5 GiB"},
		{9 << 30, "9 GiB"},
		{10_000_000_000, "9.31 GiB"},
		{1 << 40, "1 TiB"},
		{math.MaxUint64, "16 EiB"},
		// Sizes in admission reasons and the status table come from here too.
		{1536, "1.5 KiB"},
		{1<<30 + (1<<30)/3, "1.33 GiB"},
		{100, "100 B"},
	}
	for _, tt := range tests {
		if got := FormatSize(tt.in); got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFormatSizeReadsBack(t *testing.T) {
	for _, n := range []uint64{0, 1, 1023, 1 << 20, 16 << 30, 1610612736, 3 << 40} {
		got, err := ParseSize(FormatSize(n))
		if err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, got, err)
		}
	}
}
