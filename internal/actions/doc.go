// Package actions makes the HTTP calls of server actions: the requests a
// profile sends to a model server's own admin API to free or take back
// GPU memory while the server runs (vLLM's POST /sleep and /wake_up,
// SGLang's release_memory_occupation, Ollama's unload, llama-server's
// /models/unload and /models/load).
//
// It knows nothing of policies, profiles or the supervisor: it sends one
// request with a deadline and says how it went. Any 2xx answer is a
// success, and so is a status the request lists as accepted (llama-server's
// router answers 400 to a load of a model already loaded). The call's body
// is not read, because the servers disagree on what they answer (an empty
// 200, {"status":"sleeping"}, null) and none of it says whether the work is
// done. A request that needs that waits for an Until: a GET polled every
// 250 ms until the server's own status (and body) says so, as llama-server's
// /props?model=NAME&autoload=false does for a load, and vLLM's /is_sleeping
// for a sleep. A non-accepted answer, no answer within the timeout, a
// refused connection, or an until not met in time is a failure that names
// the status or the error. Whether the memory is free is still the
// supervisor's to measure.
package actions
