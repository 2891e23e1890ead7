// Package gate is sendonce's decision logic: who may deliver which bytes to which
// destination, and when.
//
// It is pure. It reads no clock (every rule takes the time as an argument), does no
// I/O, keeps no state between calls and never logs. The store loads an intent's state
// inside a transaction, asks gate what the rules say, and persists the answer; the same
// functions drive the fuzz model in this package's tests, so the rules that the store
// enforces are the rules that are tested here.
//
// The words:
//   - An Identity names a destination: a provider id (strong) or an exact visible
//     title (weak: two conversations can show the same title).
//   - A Key is an identity plus the SHA-256 of the exact bytes delivered, versioned.
//   - An Intent is one intended delivery; several keys (aliases) may reach it.
//   - An Attempt is one executor's try at an intent, fenced by a token.
//   - A Revision is a deliberate redelivery of a consumed intent, opened only by a
//     signed Authorization.
package gate
