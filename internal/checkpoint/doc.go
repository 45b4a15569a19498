// Package checkpoint keeps generations of the child's checkpoint across
// restarts. A restart after an OOM or a crash is exactly when a half-written
// checkpoint is likely, so before each restart Rotate saves a copy of the
// current one as <path>.1, shifting older copies to .2 ... .keep.
//
// The checkpoint itself is the child's: Rotate only ever reads it, never
// moves, truncates or deletes it, so the restarted child finds it where it
// left it. Every step that changes something is atomic or touches only
// what is being dropped: the copy is made under a temporary name and
// fsynced before the generations shift by rename, so a full disk or a crash
// mid-copy leaves the checkpoint and every existing generation as they were.
//
// A checkpoint may be a directory (torch.distributed.checkpoint and most
// Hugging Face savers write one): it is copied recursively, with regular
// files, directories and symbolic links (copied as links, not followed).
// Other file types make Rotate fail. A symbolic link at the checkpoint path
// itself is followed: the generation holds what it points to.
//
// One Rotate at a time per checkpoint path: leftovers of an interrupted
// rotation (hidden ".<name>.rotate-*" entries beside it) are removed when the
// next one starts.
package checkpoint
