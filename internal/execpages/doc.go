// Package execpages gives back the pages of gpuguard's own executable that
// its start-up mapped and its steady state does not use.
//
// Most of an idle instance's resident memory is not memory it allocated
// (about 3 MiB) but its executable's text and read-only data, mapped from
// the page cache as they are first touched, 64 KiB around each touch. Go
// runs the init of every package linked in, used or not (the SQLite
// driver's alone maps about 2.5 MiB), and the command line, the policy
// decoder, the first fit and the launch of a child touch code that a calm
// instance never runs again: about 15 MiB are mapped before main() and 19
// MiB once the child runs, of which a calm instance's samples use about 7.
//
// Release drops this process's mappings of those pages (madvise
// MADV_DONTNEED on the executable's read-only, never-written mappings):
// what the instance still runs maps its pages again at once, from the page
// cache (a minor fault), and the rest no longer counts in its RSS. The
// pages stay in the page cache, clean and shared, and the kernel may now
// reclaim them under memory pressure like any unmapped file page.
// Mappings holding private copies (relocated read-only data) are left
// alone: dropping them would lose what was written.
package execpages
