// With cgo (CGO_ENABLED=1) the probe is linked dynamically against libc; with
// CGO_ENABLED=0 this file is left out and the probe is static.
package main

// #include <stdlib.h>
import "C"
