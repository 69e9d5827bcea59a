// Prints the wall clock in seconds, read by the Go runtime (through the
// vDSO, never through libc). Built dynamically (cgo, external linking) and
// statically (CGO_ENABLED=0) by the containment tests.
package main

import (
	"fmt"
	"time"
)

func main() { fmt.Println(time.Now().Unix()) }
