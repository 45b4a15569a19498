package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// A body is one string, P:body:<id>, that its chunks are APPENDed to as
// they arrive and that GETRANGE reads back a chunk at a time. While it is
// written it expires (bodyTTL after its last chunk): a host that dies
// mid-write leaves nothing for good. The script that stores its task (or
// result) makes it persist, and the scripts that delete a task delete its
// bodies.

// bodyTTL is how long a body being written outlives its last chunk.
const bodyTTL = time.Hour

// bodies are the tasks' bodies, each a string of the store's.
type bodies struct {
	c      *goredis.Client
	prefix string // the store's key, then ":body:"
	moves  tasks.Bodies
}

func (b *bodies) key(id string) string { return b.prefix + id }

// write appends body's chunks to a new key, and answers its id and
// length ("" for an empty body); on an error nothing of it is left.
func (b *bodies) write(ctx context.Context, body io.Reader) (string, int64, error) {
	id := tasks.NewBodyID()
	key := b.key(id)
	n, err := b.moves.Write(body, func(_ int, chunk []byte) error {
		_, err := b.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			p.Do(ctx, "APPEND", key, chunk) // a []byte argument is written as it is: no copy
			p.PExpire(ctx, key, bodyTTL)
			return nil
		})
		return err
	})
	if err != nil {
		b.drop(ctx, id)
		return "", 0, err
	}
	if n == 0 {
		return "", 0, nil
	}
	return id, n, nil
}

// drop deletes what was written of a body no task names, as well as it
// can (else it expires).
func (b *bodies) drop(ctx context.Context, id string) {
	if id != "" {
		_ = b.c.Del(context.WithoutCancel(ctx), b.key(id)).Err()
	}
}

// EnqueueBody writes body's chunks, then stores t naming them (the script
// deletes them when it stores nothing).
func (s *Store) EnqueueBody(ctx context.Context, t api.Task, body io.Reader, maxTasks int) error {
	id, n, err := s.bodies.write(ctx, body)
	if err != nil {
		return fmt.Errorf("storing task %s in redis: %w", t.Ticket, err)
	}
	if err := s.enqueue(ctx, t, id, n, maxTasks); err != nil {
		s.bodies.drop(ctx, id) // the script did, unless it never ran
		return err
	}
	return nil
}

// AckBody writes body's chunks, then marks the task done naming them.
func (s *Store) AckBody(ctx context.Context, ticket string, result []byte, body io.Reader, now time.Time) error {
	id, n, err := s.bodies.write(ctx, body)
	if err != nil {
		return fmt.Errorf("finishing task %s in redis: %w", ticket, err)
	}
	if err := s.running(ctx, ticket, "finishing", ackScript, ticket, string(result), micros(now), id, n); err != nil {
		s.bodies.drop(ctx, id)
		return err
	}
	return nil
}

// RequestBody opens a task's request body.
func (s *Store) RequestBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error) {
	return s.body(ctx, ticket, "request body", "body", "body_size")
}

// ResultBody opens a done task's result body.
func (s *Store) ResultBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error) {
	return s.body(ctx, ticket, "result body", "result_body", "result_size")
}

// body opens the body named by the task hash's idField, reading a chunk a
// GETRANGE.
func (s *Store) body(ctx context.Context, ticket, which, idField, sizeField string) (io.ReadCloser, int64, error) {
	v, err := s.c.HMGet(ctx, s.key+":task:"+ticket, "state", idField, sizeField).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the %s of task %s in redis: %w", which, ticket, err)
	}
	if len(v) != 3 || v[0] == nil {
		return nil, 0, fmt.Errorf("task %s: %w", ticket, tasks.ErrUnknown)
	}
	id, _ := v[1].(string)
	sizeText, _ := v[2].(string)
	size, _ := strconv.ParseInt(sizeText, 10, 64)
	if id == "" || size == 0 {
		return tasks.EmptyBody(), 0, nil
	}
	return s.bodies.open(ctx, id, size), size, nil
}

// open reads body id, of size bytes, back, a chunk a GETRANGE.
func (b *bodies) open(ctx context.Context, id string, size int64) io.ReadCloser {
	key := b.key(id)
	return b.moves.Reader(ctx, func(ctx context.Context, seq int, dst []byte) ([]byte, error) {
		off := int64(seq) * tasks.ChunkSize
		if off >= size {
			return nil, io.EOF
		}
		got, err := b.c.GetRange(ctx, key, off, min(off+tasks.ChunkSize, size)-1).Result()
		if err == nil && len(got) == 0 {
			err = errors.New("the body is gone (the task was dropped or purged)")
		}
		return dst[:copy(dst, got)], err
	})
}
