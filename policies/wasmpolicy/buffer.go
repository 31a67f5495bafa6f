package wasmpolicy

import "bytes"

// bufferOf wraps dst in a bytes.Buffer that appends after its contents.
func bufferOf(dst []byte) *bytes.Buffer { return bytes.NewBuffer(dst) }
