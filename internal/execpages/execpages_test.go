package execpages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

const smapsText = `00400000-00411000 r--p 00000000 fe:01 123 /usr/bin/gpuguard
Size:                 68 kB
Rss:                  68 kB
Anonymous:             0 kB
Locked:                0 kB
VmFlags: rd mr mw me
00411000-0118a000 r-xp 00011000 fe:01 123 /usr/bin/gpuguard
Size:              13796 kB
Rss:                7328 kB
Anonymous:             0 kB
Locked:                0 kB
VmFlags: rd ex mr mw me
01ee9000-01eea000 r--p 01ae8000 fe:01 123 /usr/bin/gpuguard
Rss:                   4 kB
Anonymous:             4 kB
Locked:                0 kB
01eea000-01f73000 rw-p 01ae9000 fe:01 123 /usr/bin/gpuguard
Rss:                 364 kB
Anonymous:           120 kB
Locked:                0 kB
01f80000-01f90000 r--p 01b00000 fe:01 123 /usr/bin/gpuguard
Rss:                  64 kB
Anonymous:             0 kB
Locked:               64 kB
01fa0000-01fb0000 r--p 01b20000 fe:01 123 /usr/bin/gpuguard
Rss:                   0 kB
Anonymous:             0 kB
Locked:                0 kB
7fd447bce000-7fd447d24000 r-xp 00026000 fe:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 968 kB
Anonymous:             0 kB
Locked:                0 kB
7fd447d9e000-7fd447dc4000 r--p 00000000 00:00 0 
Rss:                 152 kB
Anonymous:           152 kB
7fff1b3fc000-7fff1b41d000 rw-p 00000000 00:00 0                          [stack]
Rss:                  16 kB
Anonymous:            16 kB
`

// TestDroppable: only the executable's own read-only, private mappings
// whose every page is a clean copy of the file are dropped: not its
// relocated read-only data (anonymous pages), its data, a locked range, an
// empty one, a library or an anonymous mapping.
func TestDroppable(t *testing.T) {
	maps, err := parse([]byte(smapsText))
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 9 {
		t.Fatalf("%d mappings, want 9: %+v", len(maps), maps)
	}
	var got []string
	var kib int64
	for _, m := range maps {
		if m.droppable("/usr/bin/gpuguard") {
			got = append(got, strconv.FormatUint(uint64(m.lo), 16))
			kib += m.rss
		}
	}
	if strings.Join(got, " ") != "400000 411000" || kib != 68+7328 {
		t.Errorf("droppable: %v (%d KiB), want the header and the text (7396 KiB)", got, kib)
	}
}

// TestRelease: in this test binary, the executable's mapped pages go
// (RssFile falls) and the program runs on, refaulting what it uses.
func TestRelease(t *testing.T) {
	before := rssFileKiB(t)
	kib, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	if kib <= 0 || after >= before {
		t.Fatalf("released %d KiB; RssFile %d KiB before, %d after: want it lower", kib, before, after)
	}
	// Code and read-only data that ran before run again.
	if _, err := parse([]byte(smapsText)); err != nil {
		t.Fatal(err)
	}
}

func rssFileKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
