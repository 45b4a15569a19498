package proc

import "testing"

func TestShebang(t *testing.T) {
	for _, tc := range []struct{ head, want string }{
		{"#!/usr/bin/python3\nimport os\n", "/usr/bin/python3"},
		{"#! /usr/bin/env python3\n", "/usr/bin/env"},
		{"#!/bin/sh -e\n", "/bin/sh"},
		{"#!/opt/venv/bin/python", "/opt/venv/bin/python"}, // cut off by the read
		{"#!\n", ""},
		{"\x7fELF\x02\x01\x01", ""},
		{"echo hi\n", ""},
		{"", ""},
	} {
		if got := shebang([]byte(tc.head)); got != tc.want {
			t.Errorf("shebang(%q) = %q, want %q", tc.head, got, tc.want)
		}
	}
}
