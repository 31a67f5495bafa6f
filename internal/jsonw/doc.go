// Package jsonw reads and writes JSON text as bytes, without decoding it
// into Go values: the hot paths of the bridge, the Gateway client and the
// runtime, and the writers whose output must match JavaScript's
// JSON.stringify byte for byte.
//
// It has three parts:
//
//   - A scanner for JSON known to be well formed (written by this process,
//     or already checked): [SkipValue], [Members], [Elements]. It reports
//     malformed structure as [ErrMalformed] and never panics, but does not
//     check every byte.
//   - A validating scanner that agrees with encoding/json on which input
//     is JSON: [ScanValue], [ScanString], [EachMember], [Valid]. Its errors
//     name the byte offset.
//   - Writers in JSON.stringify's form: [AppendString], the ordered
//     [Object] writer, [Indent] (JSON.stringify(v, null, 2)) and [Compact].
//
// Package jsonw imports only the standard library, so any package of the
// module may use it.
package jsonw
