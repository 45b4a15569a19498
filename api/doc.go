// Package api holds the wire types that several packages share: the status
// object, journal events and profile states. It has no behaviour, so the
// supervisor, the control socket, the journal and the status command can all
// import it without importing each other.
package api
