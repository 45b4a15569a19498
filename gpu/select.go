package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseDeviceList splits a --devices or CUDA_VISIBLE_DEVICES value
// ("0,1", "GPU-xxxx,1") into its entries; an empty string means "all".
func ParseDeviceList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("empty entry in device list %q", s)
		}
		out = append(out, f)
	}
	return out, nil
}

// IndexOnly reports the entries of a device list as indices, failing on
// UUIDs; the simulated backend has no UUIDs to match.
func IndexOnly(list []string) ([]int, error) {
	var out []int
	for _, e := range list {
		i, err := strconv.Atoi(e)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("device %q: want a non-negative index", e)
		}
		out = append(out, i)
	}
	return out, nil
}
