// Package actions makes the HTTP calls of server actions: the requests a
// profile sends to a model server's own admin API to free or take back
// GPU memory while the server runs (vLLM's POST /sleep and /wake_up,
// SGLang's release_memory_occupation, Ollama's unload).
//
// It knows nothing of policies, profiles or the supervisor: it sends one
// request with a deadline and says how it went. Any 2xx answer is a
// success and its body is not read, because the servers disagree on what
// they answer (an empty 200, {"status":"sleeping"}, null) and none of it
// says whether the memory is free: the supervisor measures that. A non-2xx
// answer, no answer within the timeout, or a refused connection is a
// failure that names the status or the error.
package actions
