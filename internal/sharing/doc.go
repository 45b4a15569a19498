// Package sharing is one instance's side of sharing its GPUs with other
// instances (tenants), over a Coordinator (package tenants: files in the
// runtime dir and the other tenants' sockets):
//
//   - the agreement on who steps for a shared GPU's pressure: a proposal
//     of the instance's watermark verdict, the coordinator's outcome, a
//     step decided for this instance (its checks, the confirmation, the
//     announcement), the decisions of the others noted once, and the GPU's
//     cadence (agreement.go);
//   - the one start at a time: the claim, made off the supervisor's loop,
//     and the flag the others read while it lasts (start.go);
//   - what the others see of this instance: its TenantInfo and its
//     admission leases, published at once for a reservation and a little
//     later for a release (tenancy.go);
//   - making room: the ask that idle tenants sleep for this instance, off
//     the supervisor's loop (room.go).
//
// The supervisor reaches it through its own interfaces (supervisor.Peers),
// made of api's and the decision core's words, never of this package's
// types; cmd wires the two. What the agreement asks of the instance comes
// back as inputs to the decision core (core.Peer, core.PeerNobody,
// core.Yielded), and the core says when to propose and when to claim: the
// rules stay the core's, the talking is this package's.
package sharing
