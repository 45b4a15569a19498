// Package durable holds the file-system step that makes a rename or a new
// file survive a host crash: syncing its directory (SyncDir), and Replace,
// a whole file put in place by a rename (fsynced or not). The checkpoint's
// rotation and its copier use SyncDir, after they fsync the file itself;
// the review page and `sim set` use Replace. The state file does not: package statefile replaces its file
// atomically but fsyncs neither the file nor the directory, since it is
// written anew before every start and an fsync would sit between a
// decision and the child's signal (see its doc).
package durable
