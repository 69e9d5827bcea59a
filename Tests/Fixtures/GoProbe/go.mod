module timectl.test/goprobe

go 1.19
