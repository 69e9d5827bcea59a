//go:build cgo

// With cgo (CGO_ENABLED=1) the test binary is linked dynamically against
// libc; with CGO_ENABLED=0 this file is left out and the binary is static.
package gotimers

// #include <stdlib.h>
import "C"
